"""Debian's copyright file for the package (packaging/build-package): ours, and every Python
package in the virtualenv under the license its authors state in its metadata.

    python copyright.py SITE_PACKAGES PYTHON_VERSION > usr/share/doc/paigow-table/copyright
"""

from __future__ import annotations

import sys
from importlib.metadata import Distribution, distributions


def license_of(dist: Distribution) -> str:
    """License-Expression, else a one-line License, else the license classifiers."""
    expression = dist.metadata.get("License-Expression") or ""
    if expression:
        return expression
    text = (dist.metadata.get("License") or "").strip().splitlines()
    if text and len(text[0]) < 80:
        return text[0]
    classifiers = [
        c.rsplit(" :: ", 1)[-1]
        for c in dist.metadata.get_all("Classifier") or []
        if c.startswith("License :: ")
    ]
    return " or ".join(classifiers) or "see its dist-info"


def main(site: str, pyver: str) -> None:
    root = f"opt/paigow-table/.venv/lib/python{pyver}/site-packages"
    print("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
    print("Upstream-Name: paigow-table")
    print("Comment: The program and, in its virtualenv, every Python package it runs on, each")
    print(" under its own license as its authors state it in its metadata (License-Expression,")
    print(" License or the license classifiers); the license texts are in its dist-info.")
    print()
    print("Files: *")
    print("Copyright: 2024-2026 the paigow-table authors")
    print("License: LicenseRef-Proprietary")
    for dist in sorted(distributions(path=[site]), key=lambda d: d.metadata["Name"].lower()):
        name = dist.metadata["Name"]
        if name == "paigow-table":
            continue
        top = sorted({str(f).split("/")[0] for f in dist.files or [] if "/" in str(f)})
        print()
        print("Files: " + " ".join(f"{root}/{t}/*" for t in top))
        print(f"Copyright: the {name} authors ({name} {dist.version})")
        print(f"License: {license_of(dist)}")
    print()
    print("License: LicenseRef-Proprietary")
    print(" All rights reserved; used under the terms agreed with the casino.")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
