#!/usr/bin/env bash
# Walk a skills directory and summarise what would keep each skill from being served well.
# Bash and coreutils only (find, sed, awk, grep, wc, sort); no network; writes nothing.
#
# Usage: check_skills.sh [ROOT]        (default: the directory holding this skill)
# Exit:  0 no errors (warnings allowed), 1 at least one error, 2 usage error.
#
# It is a quick first pass that needs nothing installed. `skill-mcp validate --strict ROOT`
# is the authority: it uses the server's own parser and reports every reason exactly.

set -u
export LC_ALL=C

here="$(cd "$(dirname "$0")/.." && pwd)"
root="${1:-$(dirname "$here")}"
if [ "$#" -gt 1 ]; then
  echo "usage: check_skills.sh [ROOT]" >&2
  exit 2
fi
if [ ! -d "$root" ]; then
  echo "error root-missing $root: not a directory"
  exit 1
fi

errors=0
warnings=0
skills=0
declare -A counts=()

report() { # level reason path detail
  local level="$1" reason="$2" path="$3" detail="$4"
  printf '%-7s %-24s %s: %s\n' "$level" "$reason" "$path" "$detail"
  counts["$reason"]=$(( ${counts["$reason"]:-0} + 1 ))
  if [ "$level" = "error" ]; then errors=$((errors + 1)); else warnings=$((warnings + 1)); fi
}

# Print the frontmatter of a SKILL.md (between the first line '---' and the next '---' or
# '...'), or nothing when there is none. CR line ends and a UTF-8 BOM are tolerated.
frontmatter() {
  sed -e '1s/^\xEF\xBB\xBF//' -e 's/\r$//' "$1" | awk '
    NR == 1 { if ($0 ~ /^---[ \t]*$/) { inside = 1; next } else exit 3 }
    inside && ($0 ~ /^(---|\.\.\.)[ \t]*$/) { closed = 1; exit 0 }
    inside { print }
    END { if (!closed) exit 4 }'
}

# The value of a top-level scalar key, with plain or quoted style, or a folded/literal
# block (its indented lines joined with spaces).
scalar() { # key
  awk -v key="$1" '
    function strip(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    $0 ~ "^" key ":" {
      v = strip(substr($0, length(key) + 2))
      if (v ~ /^[>|][-+]?$/) { block = 1; out = ""; next }
      if (v ~ /^".*"$/ || v ~ /^\047.*\047$/) v = substr(v, 2, length(v) - 2)
      print v; found = 1; exit
    }
    block && /^[ \t]/ { out = out (out == "" ? "" : " ") strip($0); next }
    block { print out; found = 1; exit }
    END { if (block && !found) print out }'
}

body() { # SKILL.md -> the lines after the frontmatter
  sed 's/\r$//' "$1" | awk 'NR == 1 && /^---/ { fm = 1; next }
    fm && /^(---|\.\.\.)[ \t]*$/ { fm = 0; next } !fm { print }'
}

# The same rules `skill-mcp validate --strict` applies: a description says when to use the
# skill; a body has a numbered or bulleted step, or a Steps/Usage/Workflow heading.
when_pattern='\b(use (it |this |this skill |them )?(when|whenever|for|if|to)|when (the user|a user|you|someone|asked|working|the task|a task)|whenever|if the user|applies when|for tasks?|trigger)'
step_pattern='^[[:space:]]*([0-9]+[.)][[:space:]]+[^[:space:]]|[-*+][[:space:]]+[^[:space:]]|#+[[:space:]]*(step|steps|how to|usage|workflow|quick ?start)\b)'

body_lines() { # SKILL.md -> number of lines after the frontmatter
  sed 's/\r$//' "$1" | awk 'NR == 1 && /^---/ { fm = 1; next }
    fm && /^(---|\.\.\.)[ \t]*$/ { fm = 0; next } !fm { n++ } END { print n + 0 }'
}

# Declared scripts: "script<TAB>interpreter" for each run row of the mcp-host block.
declared_scripts() {
  awk '
    /^mcp-host:/ { inblock = 1; next }
    inblock && /^[^ \t#]/ { inblock = 0 }
    !inblock { next }
    /^[ \t]+run:/ { inrun = 1; next }
    inrun && /^  [a-z]/ && !/^  [ \t]/ { flush(); inrun = 0 }
    inrun && /^[ \t]+- / { flush() }
    inrun && /script:/ { s = $0; sub(/.*script:[ \t]*/, "", s); gsub(/["\047 \t]/, "", s); script = s }
    inrun && /interpreter:/ { i = $0; sub(/.*interpreter:[ \t]*/, "", i); sub(/[ \t]*#.*/, "", i); gsub(/["\047 \t]/, "", i); interp = i }
    function flush() { if (script != "") print script "\t" interp; script = ""; interp = "" }
    END { flush() }'
}

# Credential-shaped strings. Each pattern is assembled from parts so this file does not
# match itself when a validator scans the skill that ships it.
cred_patterns=(
  "-----BEGIN [A-Z ]*PRIV""ATE KEY-----"
  "AKI""A[0-9A-Z]{16}"
  "gh[pousr]_""[A-Za-z0-9]{36,}"
  "xox[abprs]-""[A-Za-z0-9-]{10,}"
  "sk-""[A-Za-z0-9_-]{32,}"
)
cred_args=()
for pattern in "${cred_patterns[@]}"; do cred_args+=(-e "$pattern"); done

check_skill() { # dir
  local dir="$1" name md fm status desc fname lines script interp
  name="$(basename "$dir")"
  md="$dir/SKILL.md"
  skills=$((skills + 1))
  # The server refuses these three outright, so nothing else about the skill is checked.
  if ! [[ "$name" =~ ^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$ ]] || [[ "$name" == *--* ]]; then
    report error invalid-name "$dir" "directory name is not 1-64 lowercase letters, digits and single hyphens"
    return
  fi
  fm="$(frontmatter "$md")"; status=$?
  if [ "$status" -ne 0 ]; then
    report error frontmatter-parse "$md" "no '---' frontmatter block at the top, or it is not closed"
    return
  fi
  desc="$(printf '%s\n' "$fm" | scalar description)"
  fname="$(printf '%s\n' "$fm" | scalar name)"
  if [ -z "$desc" ]; then
    report error frontmatter-invalid "$md" "no description"
    return
  fi
  if [ -n "$fname" ] && [ "$fname" != "$name" ]; then
    report error name-mismatch "$md" "frontmatter name '$fname' differs from the directory name '$name'"
  fi
  if [ "${#desc}" -gt 1024 ]; then
    report warning spec-warning "$md" "description is ${#desc} characters; the format allows 1024"
  fi
  if [ "${#desc}" -lt 40 ]; then
    report error floor-description-short "$md" "the description has ${#desc} characters; say what it does and when"
  fi
  if ! printf '%s' "$desc" | grep -qiE "$when_pattern"; then
    report error floor-description-when "$md" "the description does not say when to use the skill"
  fi
  lines="$(body_lines "$md")"
  if [ "$lines" -gt 500 ]; then
    report error floor-body-too-long "$md" "the body has $lines lines; keep it to 500"
  fi
  if ! body "$md" | grep -qiE "$step_pattern"; then
    report error floor-no-steps "$md" "the body has no numbered or bulleted steps"
  fi
  while IFS=$'\t' read -r script interp; do
    [ -z "$script" ] && continue
    if [ ! -f "$dir/$script" ] || [ -L "$dir/$script" ]; then
      report error declared-script-missing "$md" "$script is declared but is not a regular file in the skill"
    fi
    case "$interp" in
      node|python|bash) ;;
      *) report error floor-interpreter "$md" "$script names interpreter '$interp'; the closed set is node, python, bash" ;;
    esac
  done < <(printf '%s\n' "$fm" | declared_scripts)
  local hit
  while IFS= read -r hit; do
    report error credential-like "$hit" "a string looks like a credential; move it to the environment"
  done < <(grep -rIlE "${cred_args[@]}" "$dir" 2>/dev/null | sort)
}

# The three layouts: ROOT/SKILL.md, ROOT/<name>/SKILL.md, ROOT/skills/<name>/SKILL.md.
if [ -f "$root/SKILL.md" ]; then
  check_skill "$root"
else
  while IFS= read -r -d '' dir; do
    dir="${dir%/}"
    if [ -f "$dir/SKILL.md" ]; then
      check_skill "$dir"
    elif [ "$(basename "$dir")" != "skills" ]; then
      report warning no-skill-md "$dir" "no SKILL.md; not a skill"
    fi
  done < <(find "$root" "$root/skills" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -print0 2>/dev/null | sort -z)
fi

echo
echo "checked $skills skills under $root: $errors errors, $warnings warnings"
for reason in $(printf '%s\n' "${!counts[@]}" | sort); do
  printf '  %-24s %d\n' "$reason" "${counts[$reason]}"
done
[ "$errors" -eq 0 ]
