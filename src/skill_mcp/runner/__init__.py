"""The runner: from a ``skill_run`` call to a bounded run of a declared script, and its result.

Below the surfaces (``surfaces.run_tool`` adapts it); returns data (plans, results, reasons),
never protocol prose. The modules:

    deferred      what a server holds: hardening at boot, the rest built on first need
    core          ``Runner``: prepare, preview, execute; one run at a time
    harden        the server process hardened against same-uid readers (environ wipe, non-dumpable)
    grants        which declared scripts may run, with which variables and hosts
    plan          the checks before confirmation, the ``RunPlan`` and the preview (``willRun``)
    script_env    the environment a script gets (the shared rule, grantrules.exec_env, for this spawner)
    interpreters  the closed interpreter set, resolved once at boot
    tokens        confirmation tokens bound to one exact ``willRun``
    types         the contract between the runner and a spawner
    spawn_local   the standalone spawner (limits, timeouts, capture)
    shim          the server's side of the exec shim started ahead of each run
    _exec_shim    the stdlib shim that applies limits and the uid drop, then execs
    rundirs       the per-run private directories
    output_store  the files recent runs wrote, kept bounded for skill-run:// reads
    spawn_broker  the appliance spawner: a client of the launcher's spawn-broker
    dump_declarations  the declared-skills document (``declwire``) for the launcher, run as an unprivileged uid
    report        what ``skill_list`` says about scripts
    audit         the per-run audit line and the "this machine looks fenced" note

Importing this package imports none of them: a server imports ``deferred`` at start-up only.
"""
