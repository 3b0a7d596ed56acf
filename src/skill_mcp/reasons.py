"""Every stable reason string this project emits.

Two enums, two planes:

* ``ProblemReason`` - why a directory or file under a root is not (fully) served. It shows
  up in ``skill_list``'s ``problems`` and in ``skill-mcp validate``. The set is additive:
  clients must treat an unknown value as a generic problem and show its ``detail``.
* ``Refusal`` - why one call was refused. Surfaces map each refusal to a tool error the model
  can act on, or to a JSON-RPC error (see ``surfaces.errors``).

Spelling: every value is kebab-case (``not-granted``) except the four confirmation-token
refusals, which are UPPER_SNAKE_CASE (``TOKEN_INVALID``) because clients
written against the original tool's confirmation protocol match those exact strings. The comment above them in
``Refusal`` says the same; ``docs/reasons.md`` opens with it; ``tests/test_architecture_docs.py``
fails on any other upper-case value.

Tests assert on these values, never on message text; ``docs/reasons.md`` lists each one and a
test fails when one is missing there.
"""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    ERROR = "error"  # the thing named by ``path`` is refused (a skill, a file, a script)
    WARNING = "warning"  # served anyway; a person should look


class ProblemReason(StrEnum):
    ROOT_MISSING = "root-missing"
    ROOT_EMPTY = "root-empty"
    NO_SKILL_MD = "no-skill-md"
    UNREADABLE = "unreadable"
    FRONTMATTER_PARSE = "frontmatter-parse"
    FRONTMATTER_INVALID = "frontmatter-invalid"
    NAME_MISMATCH = "name-mismatch"
    DUPLICATE_NAME = "duplicate-name"
    SYMLINK_ESCAPE = "symlink-escape"
    SYMLINK_LOOP = "symlink-loop"
    INVALID_NAME = "invalid-name"
    UNADDRESSABLE_FILENAME = "unaddressable-filename"
    SPECIAL_FILE = "special-file"
    DECLARATION_INVALID = "declaration-invalid"
    DECLARATION_UNKNOWN_KEY = "declaration-unknown-key"
    DECLARATION_VERSION = "declaration-version"
    DECLARED_SCRIPT_MISSING = "declared-script-missing"
    SKILL_TOO_LARGE = "skill-too-large"
    FILES_OVER_LIMIT = "files-over-limit"
    # A SKILL.md nested more levels below its top-level skill than discovery serves as a skill.
    NESTED_TOO_DEEP = "nested-too-deep"
    # Loading the directory raised: a defect met on what it holds, contained to that skill.
    LOAD_FAILED = "load-failed"
    SKILLS_LIST_EXCLUDED = "skills-list-excluded"  # no longer emitted: see EXTENSION_EXCLUDED
    # Served by the tools, left out of the Skills extension; the problem's ``rule`` says why.
    EXTENSION_EXCLUDED = "extension-excluded"
    SPEC_WARNING = "spec-warning"
    # A frontmatter value YAML 1.1 (PyYAML's default loader) reads otherwise than YAML 1.2.
    YAML_AMBIGUOUS = "yaml-version-ambiguous"
    # Packs (pack.json) - see docs/packs.md.
    PACK_INVALID = "pack-invalid"
    PACK_VERSION = "pack-version"
    DIGEST_MISMATCH = "digest-mismatch"
    # Grants and the fence - see docs/fence.md.
    GRANT_INVALID = "grant-invalid"
    GRANT_UNMATCHED = "grant-unmatched"
    INTERPRETER_UNAVAILABLE = "interpreter-unavailable"
    ENVIRON_UNSCRUBBED = "environ-unscrubbed"
    ENV_FORBIDDEN = "env-forbidden"  # a declared/granted loader variable (LD_*, PYTHON*, ...) never handed
    # Quality floors (`skill-mcp validate --strict`) - see docs/cli.md.
    FLOOR_DESCRIPTION_WHEN = "floor-description-when"
    FLOOR_DESCRIPTION_SHORT = "floor-description-short"
    FLOOR_NO_STEPS = "floor-no-steps"
    FLOOR_BODY_TOO_LONG = "floor-body-too-long"
    FLOOR_MISSING_REFERENCE = "floor-missing-reference"
    FLOOR_REFERENCE_OUTSIDE_SKILL = "floor-reference-outside-skill"
    CREDENTIAL_LIKE = "credential-like"
    # Live reload (`serve --watch`) - see docs/cli.md.
    RELOAD_KEPT_PREVIOUS = "reload-kept-previous"


# At level error, these refuse a whole skill directory (not one of its files or scripts). A
# refused skill's other problems (a long description, say) are reported too, so a surface
# that must say *why* a name is not served picks the problem from this set.
SKILL_REFUSALS = frozenset(
    {
        ProblemReason.INVALID_NAME,
        ProblemReason.FRONTMATTER_PARSE,
        ProblemReason.FRONTMATTER_INVALID,
        ProblemReason.DUPLICATE_NAME,
        ProblemReason.SYMLINK_ESCAPE,
        ProblemReason.SPECIAL_FILE,
        ProblemReason.SKILL_TOO_LARGE,
        ProblemReason.UNREADABLE,
        ProblemReason.LOAD_FAILED,
        ProblemReason.DIGEST_MISMATCH,
        ProblemReason.PACK_INVALID,
        ProblemReason.PACK_VERSION,
    }
)


class ExtensionRule(StrEnum):
    """Why a served skill is left out of the Skills extension (``extension-excluded``'s ``rule``).

    Each is a rule of the stable extension text or of the Agent Skills format that a conforming
    host checks from the entry alone; one entry that breaks one can fail a host's whole
    ``skills/list`` (FastMCP's ``list_skills()`` validates every entry), so it is never published.
    """

    NAME_MISSING = "name-missing"  # no frontmatter ``name``
    NAME_INVALID = "name-invalid"  # the frontmatter ``name`` breaks the Agent Skills naming rules
    NAME_MISMATCH = "name-mismatch"  # the URI's final segment (the directory name) is not the frontmatter name
    DESCRIPTION_TOO_LONG = "description-too-long"  # over 1,024 characters
    COMPATIBILITY_INVALID = "compatibility-invalid"  # not a string of 1-500 characters
    LICENSE_INVALID = "license-invalid"  # not a string
    METADATA_INVALID = "metadata-invalid"  # not a map of strings to strings
    ALLOWED_TOOLS_INVALID = "allowed-tools-invalid"  # not a space-separated string
    # The whole frontmatter, as a host parses it, is not the published one (an ``mcp-host:`` block
    # that the server could not parse is left out of the entry, but a host reads the file).
    FRONTMATTER_DIVERGES = "frontmatter-diverges"
    YAML_AMBIGUOUS = "yaml-version-ambiguous"  # a YAML 1.1 host reads another frontmatter than the entry
    TOO_MANY_FILES = "too-many-files"  # over 512 files: ``resources`` would have to be cut
    TOO_LARGE = "too-large"  # over 16 MiB in total: ``resources`` would have to be cut


class Refusal(StrEnum):
    # Addressing
    UNKNOWN_SKILL = "unknown-skill"
    INVALID_PATH = "invalid-path"
    NOT_FOUND = "not-found"
    NOT_A_FILE = "not-a-file"
    OUTSIDE_SKILL = "outside-skill"
    FILE_TOO_LARGE = "file-too-large"
    BATCH_TOO_LARGE = "batch-too-large"
    TOO_MANY_PATHS = "too-many-paths"
    FILE_CHANGED = "file-changed"
    # Every byte the answers in progress may hold is taken, and stayed taken for a minute.
    ANSWERS_BUSY = "answers-busy"
    INVALID_ARGUMENTS = "invalid-arguments"
    UNKNOWN_TOOL = "unknown-tool"
    UNKNOWN_URI = "unknown-uri"
    # The fence
    UNDECLARED_SCRIPT = "undeclared-script"
    INTERPRETER_UNAVAILABLE = "interpreter-unavailable"
    NOT_GRANTED = "not-granted"
    ENVIRON_UNSCRUBBED = "environ-unscrubbed"
    ROOT_WITHOUT_DROP = "root-without-drop"
    FENCE_UNAVAILABLE = "fence-unavailable"
    # The kernel cannot confine a run (no Landlock, an ABI below the minimum, no seccomp).
    SANDBOX_UNAVAILABLE = "sandbox-unavailable"
    BUSY = "busy"
    DECLINED = "declined"
    SPAWN_FAILED = "spawn-failed"
    TOO_MANY_ARGS = "too-many-args"  # skill_run argv over the count or size bound
    CLEANUP_PENDING = "cleanup-pending"  # what the previous run left is not removed yet (or could not be)
    # The appliance's broker recomputes the policy and refuses a request that asks beyond it.
    ENV_FORBIDDEN = "env-forbidden"  # a loader or interpreter start-up variable was asked for
    ENV_NOT_GRANTED = "env-not-granted"  # a variable outside the fixed allowlist and the grant
    EGRESS_NOT_GRANTED = "egress-not-granted"  # a host outside declared and granted
    TIMEOUT_NOT_ALLOWED = "timeout-not-allowed"  # a timeout above the declared one (or the ceiling)
    INTERPRETER_MISMATCH = "interpreter-mismatch"  # an interpreter other than the declared one
    # Confirmation tokens. The one exception to kebab-case: these four wire strings are spelled
    # UPPER_SNAKE_CASE, as the original tool's confirmation protocol spells them, so that a
    # client written against that protocol matches them exactly. Keep them; any new reason is kebab-case, and
    # tests/test_architecture_docs.py pins this set as the only upper-case one.
    DRAFT_CHANGED = "DRAFT_CHANGED"
    TOKEN_REUSED = "TOKEN_REUSED"
    TOKEN_EXPIRED = "TOKEN_EXPIRED"
    TOKEN_INVALID = "TOKEN_INVALID"
    # The HTTP transport (docs/http.md): refusing to start, and refusing one request.
    HTTP_ADDRESS_INVALID = "http-address-invalid"
    HTTP_LISTEN_FAILED = "http-listen-failed"  # the address is valid, but it cannot be listened on
    HTTP_AUTH_REQUIRED = "http-auth-required"
    HTTP_AUTH_CONFLICT = "http-auth-conflict"
    HTTP_NO_AUTH_REMOTE = "http-no-auth-remote"
    HTTP_TOKEN_WEAK = "http-token-weak"
    HTTP_ALLOWED_HOSTS_REQUIRED = "http-allowed-hosts-required"
    HTTP_UNAUTHORIZED = "http-unauthorized"
    HTTP_HOST_REFUSED = "http-host-refused"
    HTTP_ORIGIN_REFUSED = "http-origin-refused"
    HTTP_DRAINING = "http-draining"
    HTTP_BUSY = "http-busy"  # more requests in flight than the transport serves at once
    HTTP_METRICS_UNAUTHENTICATED = "http-metrics-unauthenticated"
    HTTP_METRICS_UNAVAILABLE = "http-metrics-unavailable"
    # A run output URI (skill-run://) that names nothing this reader may read, or that expired.
    OUTPUT_UNKNOWN = "output-unknown"
    OUTPUT_EXPIRED = "output-expired"
    # An answer that cannot reach a client in one server-sent event (surfaces.http.events).
    ANSWER_TOO_LARGE = "answer-too-large"
    # A handshake the SDK refuses (surfaces.handshake): data names the missing fields.
    INVALID_INITIALIZE = "invalid-initialize"
