"""Read pip-audit's JSON report and error output; print the verdict; exit 0, 1, 2 or 3.

    python scripts/audit_summary.py REPORT.json STDERR.txt PIP_AUDIT_EXIT_CODE

0 audited and clean, 1 known vulnerabilities, 2 pip-audit failed, 3 SKIPPED (some or all
packages could not be checked: no vulnerability database answered). See scripts/audit.sh.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OK, VULNERABLE, FAILED, SKIPPED = 0, 1, 2, 3
UNREACHABLE = re.compile(r"ConnectionError|ProxyError|NameResolution|Max retries|timed out|"
                         r"Temporary failure in name resolution|SSLError")


def verdict(report: str, stderr: str, rc: int) -> tuple[int, list[str]]:
    """Return (exit code, lines to print) for one pip-audit run."""
    if UNREACHABLE.search(stderr):
        reason = UNREACHABLE.search(stderr).group(0)
        return SKIPPED, [f"audit: SKIPPED: no vulnerability database answered ({reason}); "
                         "the installed packages were NOT audited."]
    try:
        deps = json.loads(report)["dependencies"]
    except (ValueError, KeyError, TypeError):
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        return FAILED, [f"audit: FAILED: pip-audit exited {rc} without a report:", tail]
    deps = [d for d in deps if "editable" not in d.get("skip_reason", "")]
    skipped = [d for d in deps if d.get("skip_reason")]
    audited = [d for d in deps if not d.get("skip_reason")]
    vulnerable = [d for d in audited if d.get("vulns")]
    lines = []
    for dep in vulnerable:
        for vuln in dep["vulns"]:
            fixed = ", ".join(vuln.get("fix_versions") or []) or "no fixed release"
            lines.append(f"audit: {dep['name']} {dep['version']}: {vuln['id']} (fixed in {fixed})")
    if vulnerable:
        return VULNERABLE, [f"audit: VULNERABLE: {len(vulnerable)} of {len(audited)} audited "
                            "packages have known vulnerabilities:", *lines]
    if skipped:
        return SKIPPED, [
            f"audit: SKIPPED: {len(skipped)} of {len(deps)} installed packages could NOT be "
            "audited: the vulnerability service had no record of them (a package index "
            "without vulnerability data answers this way).",
            f"audit: {len(audited)} packages were audited with no known vulnerabilities.",
            "audit: not audited: " + ", ".join(d["name"] for d in skipped[:12])
            + (" ..." if len(skipped) > 12 else ""),
        ]
    return OK, [f"audit: OK: {len(audited)} installed packages audited; "
                "no known vulnerabilities."]


def main(argv: list[str]) -> int:
    report, stderr, rc = Path(argv[1]).read_text(), Path(argv[2]).read_text(), int(argv[3])
    code, lines = verdict(report, stderr, rc)
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
