"""Write report.md and table.csv from name=value arguments into SKILL_OUTPUT_DIR."""

import csv
import os
import sys


def main(argv: list[str]) -> int:
    out = os.environ.get("SKILL_OUTPUT_DIR")
    if not out:
        print("SKILL_OUTPUT_DIR is not set: run this through skill_run", file=sys.stderr)
        return 2
    rows, odd = [], []
    for arg in argv:
        name, sep, value = arg.partition("=")
        (rows.append((name.strip(), value.strip())) if sep and name.strip() else odd.append(arg))
    with open(os.path.join(out, "table.csv"), "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["name", "value"])
        writer.writerows(rows)
    lines = ["# Report", "", f"{len(rows)} value(s).", "", "| name | value |", "|---|---|"]
    lines += [f"| {n} | {v} |" for n, v in rows]
    if odd:
        lines += ["", "## Not understood", ""] + [f"- `{a}`" for a in odd]
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote report.md and table.csv ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
