"""Word tables for search: irregular forms, derivations stemming misses, and related words.

Why a table and not a model: people ask in everyday words ("my test keeps failing", "work on
a second branch", "bill a client") and skills are written in their own terms ("debugging",
"worktree", "invoice"). A static word-embedding model bridges some of that, but the one
measured (wordllama) needs numpy and tokenizers, which would more than double an appliance
meant to stay small; this table costs nothing at run time (docs/search.md has the figures).

Every entry is a claim about how people commonly phrase software, writing and office work,
not about one collection of skills: a product for its format, a symptom for the activity that
treats it, a colloquial verb for the technical one. Words are written plainly and stemmed by
``text`` at import, so the table reads as English. A related word joins the query at a weight
below a typed word, so it can break a tie or find a skill that shares no typed word, but it
cannot outrank a skill that matches what was typed.
"""

from __future__ import annotations

from collections.abc import Mapping

# Irregular forms -> the word whose stem they should share (applied before stemming).
IRREGULAR: Mapping[str, str] = {
    "wrote": "write", "written": "write", "broke": "break", "broken": "break", "ran": "run",
    "built": "build", "made": "make", "chose": "choose", "chosen": "choose", "took": "take",
    "taken": "take", "found": "find", "gave": "give", "given": "give", "sent": "send", "kept": "keep",
    "thought": "think", "drew": "draw", "drawn": "draw", "spoke": "speak", "spoken": "speak",
    "began": "begin", "begun": "begin", "bought": "buy", "taught": "teach",
}

# Snowball stems -> the stem of the same word family that Snowball keeps apart (applied after).
DERIVED: Mapping[str, str] = {
    "failur": "fail",  # failure / failing, failed
    "analysi": "analyz", "analys": "analyz",  # analysis, analyses / analyze
    "summari": "summar",  # summary / summarize
    "debugg": "debug",  # debugger / debugging
    "verif": "verifi",  # verification / verify
    # The agent nouns skill names are made of ("mcp-builder", "slack-gif-creator") whose -er or
    # -or Snowball keeps because the word is short: one term with the verb a person types.
    "builder": "build", "creator": "creat", "writer": "write", "maker": "make", "editor": "edit",
    "checker": "check", "runner": "run", "planner": "plan", "tester": "test", "scraper": "scrape",
    "parser": "pars", "formatt": "format", "tracker": "track", "extractor": "extract", "finder": "find",
    "fixer": "fix", "reader": "read", "loader": "load", "linter": "lint", "bundler": "bundl",
}

SYNONYM = 0.8  # a related word that means the same thing ("carry out" -> execute)
WEAK = 0.3  # a related word that is a hint rather than a synonym
ALIAS = 0.5  # a related word that usually means the same thing here

# Words a person types around a request that say little about which skill it needs: generic
# verbs, adverbs, prepositions and quantities. Not stop words (a skill may be about "before"),
# but typed they count GENERIC, not 1.0, so a long skill cannot win on them.
GENERIC = 0.4
GENERIC_WORDS = frozenset(
    ["around", "through", "without", "within", "across", "after", "before", "over", "under", "between",
     "along", "again", "first", "last", "next", "another", "every", "always", "never", "already", "sure",
     "right", "well", "better", "best", "new", "old", "big", "small", "little", "lot", "lots", "good", "bad",
     "great", "whole", "different", "certain", "simple", "quick", "quickly", "easy", "possible", "make",
     "work", "keep", "try", "see", "look", "find", "know", "think", "go", "come", "take", "put", "give", "say",
     "tell", "ask", "seem", "feel", "mean", "time", "part", "place", "case", "point", "people", "day",
     "figure", "start", "done", "then", "properly", "correctly", "instead", "ever", "anymore", "together"]
)
# A past form in a request usually names what already exists ("the plan we wrote"), not the
# task asked for, so it counts as much as a related word.
PAST = 0.5

# Typed word -> related words. The key is stemmed, so every form of it counts.
TABLE: tuple[tuple[str, float, str], ...] = (
    # formats named by their product, and the other way round
    ("excel", ALIAS, "xlsx spreadsheet"), ("spreadsheet", ALIAS, "xlsx"), ("sheet", ALIAS, "xlsx spreadsheet"),
    ("csv", ALIAS, "spreadsheet"), ("workbook", ALIAS, "xlsx spreadsheet"), ("pivot", ALIAS, "spreadsheet xlsx"),
    ("formula", ALIAS, "spreadsheet"), ("word", ALIAS, "docx document"),
    ("powerpoint", ALIAS, "pptx presentation slide"), ("deck", ALIAS, "pptx presentation slide"),
    ("slide", ALIAS, "pptx presentation"), ("presentation", ALIAS, "pptx slide"),
    ("keynote", ALIAS, "pptx presentation"), ("acrobat", ALIAS, "pdf"), ("gif", ALIAS, "animated"),
    ("emoji", ALIAS, "gif"), ("browser", ALIAS, "playwright web"), ("website", ALIAS, "web frontend html"),
    ("webpage", ALIAS, "web frontend html"), ("site", ALIAS, "web"), ("poster", ALIAS, "design visual"),
    ("newsletter", ALIAS, "communications announcement"), ("memo", ALIAS, "communications announcement"),
    ("generative", ALIAS, "algorithmic art"), ("p5", ALIAS, "generative algorithmic"),
    ("font", ALIAS, "typography"), ("logo", ALIAS, "brand"), ("github", ALIAS, "gh"), ("gh", ALIAS, "github"),
    ("k8s", ALIAS, "kubernetes"), ("kubectl", ALIAS, "kubernetes"), ("jupyter", ALIAS, "notebook"),
    ("cv", ALIAS, "resume"), ("mp4", ALIAS, "video"), ("mov", ALIAS, "video"), ("podcast", ALIAS, "audio"),
    ("wcag", ALIAS, "accessibility"), ("a11y", ALIAS, "accessibility"), ("i18n", ALIAS, "localization"),
    ("l10n", ALIAS, "localization"), ("pypi", ALIAS, "package publish"), ("tdd", ALIAS, "test first"),
    ("adr", ALIAS, "decision record"), ("pr", ALIAS, "pull request"), ("flowchart", ALIAS, "diagram"),
    # symptoms -> the activity that treats them
    ("bug", ALIAS, "debug"), ("crash", ALIAS, "debug bug"), ("break", ALIAS, "debug bug"),
    ("error", WEAK, "debug"), ("exception", WEAK, "debug error"), ("wrong", WEAK, "debug bug"),
    ("weird", ALIAS, "debug unexpected"), ("strange", ALIAS, "debug unexpected"), ("fail", ALIAS, "debug"),
    ("troubleshoot", ALIAS, "debug"), ("investigate", WEAK, "debug"), ("slow", ALIAS, "performance profiling"),
    ("speed", ALIAS, "performance"), ("faster", ALIAS, "performance"), ("bottleneck", ALIAS, "profiling"),
    ("memory", WEAK, "profiling"), ("latency", WEAK, "performance"), ("randomly", ALIAS, "flaky"),
    ("intermittent", ALIAS, "flaky"), ("sometimes", WEAK, "flaky"), ("vulnerability", ALIAS, "security"),
    ("cve", ALIAS, "vulnerability security"), ("exploit", ALIAS, "security"), ("injection", WEAK, "security"),
    ("outage", ALIAS, "incident"), ("downtime", WEAK, "incident"), ("messy", ALIAS, "refactor"),
    ("restructure", ALIAS, "refactor"), ("tidy", ALIAS, "refactor"), ("untangle", ALIAS, "refactor"),
    # colloquial verbs and nouns -> the technical word
    ("execute", WEAK, "implement"), ("implement", WEAK, "execute"), ("isolate", ALIAS, "worktree"),
    ("checkout", ALIAS, "worktree"), ("feedback", ALIAS, "review"), ("critique", ALIAS, "review"),
    ("comment", WEAK, "review feedback"), ("prove", ALIAS, "verify evidence"), ("confirm", ALIAS, "verify"),
    ("evidence", ALIAS, "verify"), ("done", WEAK, "complete"), ("finished", WEAK, "complete"),
    ("idea", WEAK, "brainstorm design"), ("brainstorm", WEAK, "idea design"),
    ("simultaneously", ALIAS, "parallel"), ("concurrently", ALIAS, "parallel"), ("helpers", WEAK, "agents"),
    ("workers", WEAK, "agents"), ("publish", WEAK, "release"), ("bump", ALIAS, "version upgrade"),
    ("upgrade", ALIAS, "update dependency"), ("container", ALIAS, "docker"), ("pipeline", WEAK, "ci"),
    ("endpoint", ALIAS, "api"), ("monitoring", ALIAS, "observability metrics"),
    ("retro", ALIAS, "postmortem"), ("retrospective", ALIAS, "postmortem"), ("call", WEAK, "meeting"),
    ("minutes", ALIAS, "meeting notes"), ("agenda", ALIAS, "meeting"), ("standup", ALIAS, "meeting"),
    ("transcript", WEAK, "meeting"), ("reply", ALIAS, "email respond"), ("inbox", ALIAS, "email"),
    ("plot", ALIAS, "chart visualization"), ("graph", ALIAS, "chart"), ("dashboard", WEAK, "chart"),
    ("dataset", ALIAS, "data"), ("dataframe", ALIAS, "pandas"), ("bash", ALIAS, "shell"),
    ("terminal", WEAK, "shell command"), ("translate", ALIAS, "localization"),
    ("clip", WEAK, "video"), ("recording", ALIAS, "audio"), ("speech", ALIAS, "transcription audio"),
    ("crawl", ALIAS, "scraping"), ("wheel", WEAK, "package"),
    ("backlog", ALIAS, "triage issues"), ("ticket", ALIAS, "issue"), ("invite", ALIAS, "calendar meeting"),
    ("schedule", WEAK, "calendar"), ("bill", ALIAS, "invoice"), ("billing", ALIAS, "invoice"),
    ("receipt", ALIAS, "invoice"), ("grammar", ALIAS, "style"), ("tone", WEAK, "style voice"),
    ("wiki", WEAK, "knowledge documentation"), ("docs", ALIAS, "documentation"),
)

# Idioms among those pairs: their words mean nothing on their own ("no idea" is not about
# ideas, "carry out" not about carrying), so typed they count GENERIC.
IDIOMS = frozenset(
    [("no", "idea"), ("carry", "out"), ("look", "over"), ("track", "down"), ("wrap", "up"), ("go", "ahead"),
     ("bounce", "ideas"), ("follow", "through"), ("break", "down"), ("clean", "up"), ("know", "why")]
)

# Two typed words in a row (stop words included) -> related words.
PHRASES: tuple[tuple[str, str, float, str], ...] = (
    ("carry", "out", SYNONYM, "execute"), ("go", "ahead", ALIAS, "execute"), ("follow", "through", ALIAS, "execute"),
    ("break", "down", ALIAS, "plan tasks"), ("step", "by", WEAK, "plan"),
    ("second", "branch", ALIAS, "worktree isolated"), ("another", "branch", ALIAS, "worktree isolated"),
    ("two", "branches", ALIAS, "worktree isolated"), ("several", "branches", ALIAS, "worktree isolated"),
    ("working", "copy", ALIAS, "worktree workspace"), ("side", "by", ALIAS, "parallel"),
    ("at", "once", WEAK, "parallel"), ("in", "parallel", ALIAS, "parallel agents"),
    ("look", "over", SYNONYM, "review"), ("pair", "of", WEAK, "review"), ("check", "my", WEAK, "review"),
    ("think", "through", ALIAS, "brainstorm"), ("bounce", "ideas", ALIAS, "brainstorm"),
    ("wrap", "up", ALIAS, "finish complete"), ("track", "down", ALIAS, "debug"), ("know", "why", ALIAS, "debug"), ("idea", "why", ALIAS, "debug"),
    ("root", "cause", ALIAS, "debug"), ("no", "idea", ALIAS, "debug"), ("clean", "up", WEAK, "refactor"),
    ("post", "mortem", ALIAS, "postmortem"), ("follow", "up", ALIAS, "email"),
    ("screen", "reader", ALIAS, "accessibility"), ("regular", "expression", ALIAS, "regex"),
    ("getting", "started", ALIAS, "readme quick start"), ("github", "actions", ALIAS, "ci workflow"),
    ("pull", "request", ALIAS, "pr"), ("house", "style", ALIAS, "style guide"),
    ("style", "guide", WEAK, "style"), ("time", "zones", ALIAS, "calendar scheduling"),
    ("cover", "letter", ALIAS, "resume"), ("schema", "change", ALIAS, "migration"),
)

