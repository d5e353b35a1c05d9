"""Generate the Python stubs of the groundwire contract into clients/python.

grpcio-tools ships protoc and the Python gRPC generator as a library rather than
as a protoc plugin binary, so this script drives `grpc_tools.protoc` directly
(buf drives the other languages). Generated modules import each other as
`groundwire.v1`, which would collide with the server package `groundwire`; the
imports are rewritten to `groundwire_client.v1` so the stubs form a package of
their own. The output is deterministic: `make gen` twice gives no diff.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
OUT = ROOT / "clients" / "python" / "src" / "groundwire_client" / "v1"

_FROM_IMPORT = re.compile(r"^from groundwire\.v1 import ", re.MULTILINE)
_DOTTED = re.compile(r"\bgroundwire\.v1\.")


def main() -> int:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = str(Path(protoc.__file__).parent / "_proto")
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"--proto_path={PROTO_ROOT}",
            f"--proto_path={include}",
            f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
            f"--python_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--mypy_out={tmp}",
            f"--mypy_grpc_out={tmp}",
            *protos,
        ]
        if protoc.main(args) != 0:
            print("protoc failed", file=sys.stderr)
            return 1
        generated = Path(tmp) / "groundwire" / "v1"
        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.mkdir(parents=True)
        for src in sorted(generated.iterdir()):
            text = src.read_text()
            text = _FROM_IMPORT.sub("from groundwire_client.v1 import ", text)
            if src.suffix == ".pyi":
                text = _DOTTED.sub("groundwire_client.v1.", text)
            (OUT / src.name).write_text(text)
        (OUT / "__init__.py").write_text('"""Generated stubs of groundwire.v1 (do not edit)."""\n')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
