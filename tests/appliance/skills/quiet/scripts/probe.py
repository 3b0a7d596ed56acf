"""The probe skill's script, run from a skill that declares no egress.

A run's sandbox lets it read its own skill and the runtime, never another skill, so the probe's
code reaches this skill the way a library would: the test harness mounts it read-only under
/usr/local/lib/skill-mcp-test (``tests/appliance/conftest.PROBE_LIB``). Both skills then probe
with exactly the same behaviour.
"""

import runpy

runpy.run_path("/usr/local/lib/skill-mcp-test/probe.py", run_name="__main__")
