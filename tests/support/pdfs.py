"""Hand-written PDFs for loader tests: the objects in order, then the
cross-reference table and trailer that make them a file pypdf reads."""

from __future__ import annotations

from collections.abc import Sequence


def assemble_pdf(objects: Sequence[bytes]) -> bytes:
    """A PDF 1.4 file of `objects` (object 1 is the catalog), numbered from 1."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)
