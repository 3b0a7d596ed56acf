"""The probe skill's script, run from a skill that declares no egress.

The fence decides which file is launched, not what a launched script may read: this entry
point runs the probe skill's code, so both skills probe with exactly the same behaviour.
"""

import runpy

runpy.run_path("/skills/probe/scripts/probe.py", run_name="__main__")
