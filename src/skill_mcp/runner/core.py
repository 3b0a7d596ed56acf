"""``Runner``: the one object the ``skill_run`` surface talks to.

Built once from ``Settings`` (no module-level state); a server builds it on first need and
hardens itself at boot (``runner.deferred``). It owns the interpreter set,
the spawner, the token book, the one-run-at-a-time flag and the boot facts (environ wipe,
root drop, fenced machine). The surface calls, in order:

    prepared = runner.prepare(catalog, skill, script, args)   # every check short of confirmation
    runner.preview(prepared)                                  # token flow, first call
    await runner.execute(prepared, token=...)                 # token flow, repeat call
    await runner.execute(prepared, confirmed=True)            # after an accepted elicitation

A refusal is a ``SkillMcpError``; a script that ran (whatever its exit) is a result dict.
"""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skill_mcp import confine
from skill_mcp.config import Settings
from skill_mcp.errors import SkillMcpError
from skill_mcp.models import Catalog, Problem, Skill
from skill_mcp.reasons import Refusal
from skill_mcp.runner.audit import FENCED_NOTE, AuditSink, audit_record, looks_fenced, stderr_sink
from skill_mcp.runner.grants import GrantSet, build_grants
from skill_mcp.runner.harden import HardenReport
from skill_mcp.runner.interpreters import Interpreters, resolve_interpreters
from skill_mcp.runner.output_store import OutputStore, kept_outputs
from skill_mcp.runner.plan import Prepared, prepare
from skill_mcp.runner.report import Blocked, FenceReport, fence_report
from skill_mcp.runner.spawn_local import LocalSpawner, UserDrop
from skill_mcp.runner.tokens import TokenBook
from skill_mcp.runner.types import OutputTap, Spawner
from skill_mcp.sandbox_rules import MIN_LANDLOCK_ABI

DEFAULT_SCRIPT_USER = "nobody"
STANDALONE_EGRESS = (
    "standalone: no egress fence, so nothing was refused or counted; a script whose skill "
    "declares no egress has no network, one that declares egress reaches any host"
)


def resolve_drop(script_user: str | None, euid: int) -> UserDrop | SkillMcpError | None:
    """The identity a root server drops scripts to; ``None`` when not root; an error to refuse with."""
    if euid != 0:
        return None
    wanted = script_user or DEFAULT_SCRIPT_USER
    try:
        entry = pwd.getpwuid(int(wanted)) if wanted.isdigit() else pwd.getpwnam(wanted)
    except (KeyError, ValueError):
        return SkillMcpError(
            Refusal.ROOT_WITHOUT_DROP,
            f"the server runs as root and the script user {wanted!r} does not exist; set "
            "SKILL_MCP_SCRIPT_USER to an unprivileged user (scripts never run as root)",
        )
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        return SkillMcpError(
            Refusal.ROOT_WITHOUT_DROP, f"the script user {wanted!r} is root or in group 0; scripts never run as root"
        )
    return UserDrop(uid=entry.pw_uid, gid=entry.pw_gid, name=entry.pw_name)


def local_sandbox(
    settings: Settings, audit: AuditSink, probe: Callable[[int], int] = confine.probe
) -> tuple[bool, SkillMcpError | None]:
    """(confine runs?, the refusal every run gets): whether this kernel can confine a standalone run.

    Where it cannot, the server runs no script, unless the owner of a server that is not hosted
    set ``SKILL_MCP_UNCONFINED=1``: then scripts run without the sandbox and that is said on
    stderr now, once. ``probe`` changes nothing; the shim applies the rules at each run.
    """
    try:
        probe(MIN_LANDLOCK_ABI)
    except confine.SandboxUnavailable as exc:
        if settings.allow_unconfined and not settings.hosted:
            audit(
                {
                    "event": "warning",
                    "reason": str(Refusal.SANDBOX_UNAVAILABLE),
                    "detail": f"scripts run WITHOUT a kernel sandbox (SKILL_MCP_UNCONFINED=1): {exc.detail}; a script "
                    "reads and writes everything this user can and reaches any host",
                }
            )
            return False, None
        fix = (
            "a hosted server runs no script without it"
            if settings.hosted
            else "set SKILL_MCP_UNCONFINED=1 to run scripts without it, at that risk"
        )
        return True, SkillMcpError(
            Refusal.SANDBOX_UNAVAILABLE, f"this kernel cannot confine a script: {exc.detail}; {fix}"
        )
    return True, None


def broker_refusal(broker: Any) -> SkillMcpError | None:
    """Ask the appliance's broker (bounded) whether its fence is in force; refuse every run if not."""
    try:
        facts = broker.hello()
    except SkillMcpError as exc:
        return SkillMcpError(Refusal.FENCE_UNAVAILABLE, f"the spawn-broker did not answer: {exc.detail}")
    if not facts.get("fence"):
        return SkillMcpError(
            Refusal.FENCE_UNAVAILABLE,
            "the appliance's egress fence is not in force: " + str(facts.get("fenceDetail") or "no detail"),
        )
    if not facts.get("sandbox"):
        return SkillMcpError(
            Refusal.SANDBOX_UNAVAILABLE,
            "the appliance's kernel cannot confine a script: "
            + str(facts.get("sandboxDetail") or "its broker did not say it can"),
        )
    return None


@dataclass(slots=True)
class Runner:
    settings: Settings
    interpreters: Interpreters
    spawner: Spawner
    tokens: TokenBook
    harden: HardenReport | None = None  # None: the process was never hardened
    boot_refusal: SkillMcpError | None = None  # e.g. root without a drop: every run refuses
    runs_as: str | None = None
    fenced: bool | None = None  # None: not asked yet; decided on the first failed run (no boot cost)
    audit: AuditSink = stderr_sink
    # The files recent runs wrote, served back as skill-run:// resources (runner.output_store).
    outputs: OutputStore = field(default_factory=OutputStore, repr=False)
    _busy: bool = field(default=False, repr=False)
    _grants: tuple[Catalog, GrantSet] | None = field(default=None, repr=False)

    @classmethod
    def create(
        cls,
        settings: Settings,
        *,
        harden: HardenReport | None,
        clock: Callable[[], float] = time.time,
        spawner: Spawner | None = None,
        interpreters: Interpreters | None = None,
        audit: AuditSink = stderr_sink,
        euid: int | None = None,
        fenced: bool | None = None,
        on_output: OutputTap | None = None,
    ) -> Runner:
        """The one constructor: boot facts decided once, from ``settings`` and the boot's ``harden``.

        The spawner is the appliance's broker when ``settings.broker_fd`` is set (asked at once
        whether its fence is in force), else the local one with the root drop; a given
        ``spawner`` (a test's) replaces either. A server reaches this through
        ``DeferredRunner.boot``, which hardens the process and reports a failed wipe first.
        """
        boot_refusal: SkillMcpError | None = None
        runs_as = None
        if spawner is None and settings.broker_fd is not None:
            # The appliance: the launcher's broker runs scripts as their own uid behind the egress fence.
            from skill_mcp.runner.spawn_broker import BrokerSpawner

            broker = BrokerSpawner.from_fd(settings.broker_fd)
            spawner, fenced, boot_refusal = broker, True, broker_refusal(broker)
        elif spawner is None:
            drop = resolve_drop(settings.script_user, os.geteuid() if euid is None else euid)
            if isinstance(drop, SkillMcpError):
                boot_refusal, drop = drop, None
            runs_as = drop.describe() if drop else None
            interpreters = interpreters or resolve_interpreters()
            confined, refusal = local_sandbox(settings, audit)
            boot_refusal = boot_refusal or refusal
            spawner = LocalSpawner(
                drop=drop, confined=confined, runtimes=tuple(interpreters.paths.values()), on_output=on_output
            )
        return cls(
            settings=settings,
            interpreters=interpreters or resolve_interpreters(),
            spawner=spawner,
            tokens=TokenBook(clock=clock),
            harden=harden,
            boot_refusal=boot_refusal,
            runs_as=runs_as,
            fenced=fenced,
            audit=audit,
        )

    def looks_fenced(self) -> bool:
        """Proxy variable or nftables egress table; asked once, on the first failed run."""
        if self.fenced is None:
            self.fenced = looks_fenced(self.settings.environ)
        return self.fenced

    @property
    def unscrubbed_blocks(self) -> bool:
        """Hosted and the wipe failed (or never ran) and the owner did not accept that."""
        scrubbed = self.harden is not None and self.harden.scrubbed
        return self.settings.hosted and not scrubbed and not self.settings.allow_unscrubbed

    def grants(self, catalog: Catalog) -> GrantSet:
        """The grants for ``catalog``, built once per catalog object (a reload swaps the object).

        Building them walks every skill, which a large catalog would pay on the preview and again
        on the confirmed run (figures in bench/README.md, "Figures behind design choices"). One
        entry, held by this runner, like ``FenceStates``' report.
        """
        if self._grants is None or self._grants[0] is not catalog:
            self._grants = (catalog, build_grants(catalog, self.settings.skill_run, hosted=self.settings.hosted))
        return self._grants[1]

    def stop_running(self) -> None:
        """Server shutdown: end the script in progress so its call returns (``Plugins.closers``)."""
        stop = getattr(self.spawner, "stop_running", None)
        if callable(stop):
            stop()

    def prepare(self, catalog: Catalog, skill: str, script: str, args: Any) -> Prepared:
        prepared = prepare(
            catalog.skills.get(skill),
            skill,
            script,
            args if args is not None else [],
            grants=self.grants(catalog),
            interpreters=self.interpreters,
            environ=self.settings.environ,
            data_dir=str(self.settings.data_dir) if self.settings.data_dir else None,
            runs_as=self.runs_as,
            spawner=self.spawner.name,
            held=self.settings.broker_holds,
        )
        if self.unscrubbed_blocks:
            raise SkillMcpError(
                Refusal.ENVIRON_UNSCRUBBED,
                "this hosted server could not wipe its exec-time environment, so it runs no "
                "script (set MCP_SKILL_ALLOW_UNSCRUBBED=1 to accept that risk)",
            )
        if self.boot_refusal is not None:
            raise self.boot_refusal
        # Every call that passed the checks may be followed by a confirmed run (token, elicitation):
        # have the local spawner's next shim start now, so the run does not wait for it.
        warm = getattr(self.spawner, "warm", None)
        if callable(warm):
            warm()
        return prepared

    def confirmation_token(self, prepared: Prepared) -> str:
        """A token bound to ``prepared``'s plan, which ``execute`` accepts once: the only place a
        token is minted (the preview's ``confirmToken``, a 2026-07-28 ``requestState``, the token
        a mid-call confirmation runs with). A plan changed since is refused as ``DRAFT_CHANGED``."""
        return self.tokens.mint(prepared.canonical())

    def preview(self, prepared: Prepared) -> dict[str, Any]:
        """What the user must approve, and the token bound to it; the surface words the next step."""
        return {
            "status": "confirmation-required",
            "preview": {"willRun": dict(prepared.will_run)},
            "confirmToken": self.confirmation_token(prepared),
        }

    async def execute(
        self, prepared: Prepared, *, token: str | None = None, confirmed: bool = False, scope: str | None = None
    ) -> dict[str, Any]:
        """Run once. Exactly one of ``token`` (token flow) or ``confirmed`` (accepted elicitation).

        The run's outputs are kept for readers in ``scope`` (an HTTP session; None: by id alone)."""
        if self._busy:
            raise SkillMcpError(Refusal.BUSY, "another skill_run is in progress; one runs at a time")
        if token is not None:
            nonce = self.tokens.check(token, prepared.canonical())
            self.tokens.spend(nonce, token)
        elif not confirmed:
            raise SkillMcpError(Refusal.DECLINED, "nothing runs without a confirmation")
        self._busy = True
        try:
            result = await self.spawner.run(prepared.plan)
        except SkillMcpError as exc:
            self.audit(audit_record(prepared.plan, None, spawner=self.spawner.name, refused=str(exc.reason)))
            raise
        finally:
            self._busy = False
        out = result.to_dict()
        if result.status != "ok" and self.looks_fenced():
            out["notes"] = [*out.get("notes", []), FENCED_NOTE]
        out["skill"], out["script"] = prepared.plan.skill, prepared.plan.script
        # Standalone has no fence to report from (the appliance's broker sends its own report).
        out.setdefault("egress", {"fenced": False, "detail": STANDALONE_EGRESS})
        if result.outputs is not None:
            out.update(kept_outputs(self.outputs, result.outputs, scope))
        self.audit(audit_record(prepared.plan, result, spawner=self.spawner.name))
        return out

    def report(self, catalog: Catalog) -> FenceReport:
        """The fence's part of ``skill_list`` (see ``runner.report``)."""
        blocked = None
        unscrubbed = None
        if self.harden is None or not self.harden.scrubbed:
            unscrubbed = (
                "the exec-time environment block was not wiped"
                + (f": {self.harden.detail}" if self.harden and self.harden.detail else "")
                + "; a same-uid script may read this server's environment"
            )
        if self.unscrubbed_blocks:
            blocked = Blocked(
                Refusal.ENVIRON_UNSCRUBBED, "this hosted server runs no script (MCP_SKILL_ALLOW_UNSCRUBBED=1 allows it)"
            )
        elif self.boot_refusal is not None:
            blocked = Blocked(self.boot_refusal.reason, self.boot_refusal.detail)
        return fence_report(catalog, self.grants(catalog), self.interpreters, blocked=blocked, unscrubbed=unscrubbed)

    def states(self, catalog_provider: Callable[[], Catalog]) -> FenceStates:
        """The ``surfaces.registry.ScriptStates`` view ``skill_list`` and ``skill_load`` use."""
        return FenceStates(self, catalog_provider)


@dataclass(slots=True)
class FenceStates:
    """Implements ``ScriptStates`` structurally (runner never imports surfaces).

    The report is recomputed when the catalog object changes (a reload swaps it) and kept for
    that catalog only: one entry, held by this instance, not a module-level cache. The
    per-skill mappings derived from it are kept beside it, because every ``skill_list`` page
    asks for them again; they are shared between answers, so callers must not mutate them.
    """

    runner: Runner
    catalog_provider: Callable[[], Catalog]
    _last: tuple[Catalog, FenceReport] | None = field(default=None, repr=False)
    _per_skill: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict, repr=False)

    def _report(self) -> FenceReport:
        catalog = self.catalog_provider()
        if self._last is None or self._last[0] is not catalog:
            self._last = (catalog, self.runner.report(catalog))
            self._per_skill = {}
        return self._last[1]

    def _skill(self, skill: Skill) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        report = self._report()
        per_skill = self._per_skill
        known = per_skill.get(skill.name)
        if known is None:
            known = per_skill[skill.name] = (self._scripts(report, skill), self._extras(report, skill))
        return known

    @staticmethod
    def _scripts(report: FenceReport, skill: Skill) -> list[dict[str, Any]]:
        descriptions = {r.script: r.description for r in skill.declaration.run} if skill.declaration else {}
        out = []
        for state in report.scripts.get(skill.name, ()):
            entry = state.to_dict()
            if state.reason:
                entry["reason"] = state.reason
            if descriptions.get(state.script):
                entry["description"] = descriptions[state.script]
            out.append(entry)
        return out

    @staticmethod
    def _extras(report: FenceReport, skill: Skill) -> dict[str, Any]:
        # Only the lists that have something in them: an entry without either key has no
        # script this deployment cannot run and none the grant leaves out.
        extras = report.skill_dict(skill.name)
        return {k: extras[k] for k in ("unavailableScripts", "ungrantedScripts") if extras[k]}

    def grant(self) -> Mapping[str, Any]:
        return self._report().top_dict()

    def scripts(self, skill: Skill) -> Sequence[Mapping[str, Any]]:
        return self._skill(skill)[0]

    def skill_extras(self, skill: Skill) -> Mapping[str, Any]:
        """``unavailableScripts`` and ``ungrantedScripts`` for one skill's entry, each only when non-empty."""
        return self._skill(skill)[1]

    def problems(self) -> Sequence[Problem]:
        return self._report().problems
