"""The OpenSearch distributions scripts/opensearch_node.py runs, laid out from Maven
Central artifacts alone (no tarball exists there), one folder per release line:

- "2": OpenSearch 2.19.1 + k-NN 2.19.1.0 (Lucene 9) on Java 17 (2.19 does not start
  on Java 25);
- "3": OpenSearch 3.5.0 + k-NN 3.5.0.0 (Lucene 10) on Java 21+ (the Temurin 25 JDK
  here; only that node's JAVA_HOME, the machine's default stays Java 17).

A layout: `lib/` holds org.opensearch:opensearch with its runtime dependencies plus
log4j-core, the plugin classloader, spatial4j and jts-core (3.x adds the agent's
bootstrap classes, which its `Security` setup calls; the agent itself, the 3.x stand-in
for the security manager, is not on Maven Central for 3.5, so a 3.x test node runs
without that sandbox); `modules/` holds transport-netty4, analysis-common, reindex and
lang-painless (descriptors and security policies written here, since the jars carry
none); `plugins/opensearch-knn/` is the k-NN plugin's zip unpacked. `mvn` resolves it
all (`dependency:copy-dependencies` over a reactor of generated poms).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
LINE_ENV = "GROUNDWIRE_OPENSEARCH_LINE"
JVM = Path("/usr/lib/jvm")


@dataclass(frozen=True)
class Line:
    """One OpenSearch release line: the versions laid out and the Java it runs on."""

    name: str
    version: str
    knn_version: str
    java_min: int
    java_max: int
    java_env: str  # a variable naming this line's Java home, before any search
    preferred_java: tuple[Path, ...]
    # Versions the distribution ships in lib/ that its pom does not declare.
    lib_extras: tuple[tuple[str, str, str], ...]
    revision: int  # a change of the layout installs afresh beside the old one
    # The libraries of the gRPC transport stand-in (3.x: see GRPC_STAND_IN); none, none.
    grpc_libraries: tuple[tuple[str, str, str], ...] = ()

    @property
    def home_name(self) -> str:
        return f"opensearch-{self.version}-r{self.revision}"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


LINES: dict[str, Line] = {
    "2": Line(
        name="2",
        version="2.19.1",
        knn_version="2.19.1.0",
        java_min=17,
        java_max=17,
        java_env="GROUNDWIRE_OPENSEARCH_JAVA_HOME",
        preferred_java=(JVM / "java-17-openjdk-amd64",),
        lib_extras=(
            ("org.apache.logging.log4j", "log4j-core", "2.21.0"),
            ("org.opensearch", "opensearch-plugin-classloader", "2.19.1"),
            ("org.locationtech.spatial4j", "spatial4j", "0.7"),
            ("org.locationtech.jts", "jts-core", "1.15.0"),
        ),
        revision=4,
    ),
    "3": Line(
        name="3",
        version="3.5.0",
        knn_version="3.5.0.0",
        java_min=21,
        java_max=25,
        java_env="GROUNDWIRE_OPENSEARCH3_JAVA_HOME",
        preferred_java=(JVM / "temurin-25-jdk-amd64",),
        lib_extras=(
            ("org.apache.logging.log4j", "log4j-core", "2.25.3"),
            ("org.opensearch", "opensearch-plugin-classloader", "3.5.0"),
            ("org.locationtech.spatial4j", "spatial4j", "0.7"),
            ("org.locationtech.jts", "jts-core", "1.15.0"),
            # AgentPolicy (the 3.x Security setup's); 3.5.0's own is not served, and
            # 3.4.0 has the same classes and signatures (javap) as 3.6.0.
            ("org.opensearch", "opensearch-agent-bootstrap", "3.4.0"),
        ),
        revision=4,
        # k-NN 3.5 takes Guava from the gRPC transport it extends (its zip has none).
        grpc_libraries=(("com.google.guava", "guava", "33.5.0-jre"),),
    ),
}
DEFAULT_LINE = "3"


def line_of(name: str | None = None) -> Line:
    """The line `name` names ("2", "2.19", "3", "3.5.0", ...; by its major version),
    else $GROUNDWIRE_OPENSEARCH_LINE, else the current line (3)."""
    chosen = (name or os.environ.get(LINE_ENV, "") or DEFAULT_LINE).strip()
    major = chosen.split(".")[0]
    if major not in LINES:
        raise ValueError(f"unknown OpenSearch line {chosen!r} (known: {', '.join(LINES)})")
    return LINES[major]


# name -> (artifactId, classname, extended plugins, description, security policy grants)
MODULES: dict[str, tuple[str, str, str, str, Sequence[str]]] = {
    "transport-netty4": (
        "transport-netty4-client",
        "org.opensearch.transport.Netty4Plugin",
        "",
        "Netty 4 based transport implementation",
        (
            'permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";',
            'permission java.net.SocketPermission "*", "accept,connect";',
            'permission java.lang.RuntimePermission "*", "setContextClassLoader";',
            'permission java.lang.RuntimePermission "getClassLoader";',
            'permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";',
        ),
    ),
    "lang-painless": (
        "lang-painless",
        "org.opensearch.painless.PainlessPlugin",
        "",
        "An easy, safe and fast scripting language for OpenSearch",
        (
            'permission java.lang.RuntimePermission "createClassLoader";',
            'permission java.lang.RuntimePermission "getClassLoader";',
        ),
    ),
    # _reindex and _delete_by_query: a publish copies a tenant's unchanged documents
    # into the new version's index server side (stores/opensearch/versions.py).
    "reindex": (
        "reindex-client",
        "org.opensearch.index.reindex.ReindexPlugin",
        "",
        "The Reindex module adds APIs to reindex from one index to another or update"
        " documents in place.",
        ('permission java.net.SocketPermission "*", "connect";',),
    ),
    "analysis-common": (
        "analysis-common",
        "org.opensearch.analysis.common.CommonAnalysisPlugin",
        "lang-painless",
        'Adds "built in" analyzers to OpenSearch.',
        (),
    ),
}


def log(message: str) -> None:
    print(f"[opensearch_node] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- java


def java_home(line: Line | None = None) -> Path:
    """A Java home `line` runs on: the line's variable (GROUNDWIRE_OPENSEARCH_JAVA_HOME
    for 2.x, GROUNDWIRE_OPENSEARCH3_JAVA_HOME for 3.x), else its preferred JDK, else any
    JDK of an accepted major under /usr/lib/jvm, else JAVA_HOME when it fits."""
    line = line or line_of()
    override = os.environ.get(line.java_env)
    if override:
        return Path(override)
    candidates = list(line.preferred_java)
    if JVM.is_dir():
        candidates += sorted(JVM.iterdir(), reverse=True)
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    for home in candidates:
        major = _java_major(home)
        fits = major is not None and line.java_min <= major <= line.java_max
        if fits and (home / "bin" / "java").exists():
            return home
    wanted = (
        f"Java {line.java_min}"
        if line.java_min == line.java_max
        else f"Java {line.java_min} to {line.java_max}"
    )
    raise RuntimeError(
        f"OpenSearch {line.version} needs {wanted} and none was found (looked in "
        f"/usr/lib/jvm and JAVA_HOME); install one or set {line.java_env}"
    )


def _java_major(home: Path) -> int | None:
    release = home / "release"
    if release.exists():
        for text in release.read_text(errors="replace").splitlines():
            if text.startswith("JAVA_VERSION="):
                version = text.split("=", 1)[1].strip().strip('"')
                head = version.split(".")[0]
                return int(head) if head.isdigit() else None
    return None


# ------------------------------------------------------------------------ install


def cache_root() -> Path:
    """$GROUNDWIRE_CACHE, else ~/.cache/groundwire (or /var/cache/groundwire as root:
    the unprivileged node user cannot enter /root)."""
    if os.environ.get("GROUNDWIRE_CACHE"):
        return Path(os.environ["GROUNDWIRE_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/groundwire")
    return Path.home() / ".cache" / "groundwire"


def installed(line: Line | None = None, cache: Path | None = None) -> bool:
    line = line or line_of()
    return ((cache or cache_root()) / line.home_name / ".complete").exists()


def _dep(group: str, artifact: str, version: str, scope: str = "", extra: str = "") -> str:
    scope_xml = f"<scope>{scope}</scope>" if scope else ""
    return (
        f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version>{scope_xml}{extra}</dependency>"
    )


def _pom(artifact: str, deps: Sequence[str]) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>groundwire.opensearch</groupId>
  <artifactId>{artifact}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>{"".join(deps)}</dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId>
    <version>{DEPENDENCY_PLUGIN.rsplit(":", 1)[1]}</version>
    <configuration>
      <outputDirectory>${{project.basedir}}/out</outputDirectory>
      <includeScope>runtime</includeScope>
    </configuration>
  </plugin></plugins></build>
</project>
"""


def _write_poms(line: Line, work: Path) -> None:
    """A reactor: one pom per folder of the distribution; each module's pom has the
    server as `provided`, so only the module's own jars are copied."""
    server = _dep("org.opensearch", "opensearch", line.version)
    parts = {"lib": [server, *(_dep(g, a, v) for g, a, v in line.lib_extras)]}
    provided = _dep("org.opensearch", "opensearch", line.version, scope="provided")
    for name, (artifact, *_rest) in MODULES.items():
        parts[name] = [provided, _dep("org.opensearch.plugin", artifact, line.version)]
    no_transitive = (
        "<type>zip</type><exclusions><exclusion><groupId>*</groupId>"
        "<artifactId>*</artifactId></exclusion></exclusions>"
    )
    if line.grpc_libraries:
        parts["transport-grpc"] = [provided, *(_dep(g, a, v) for g, a, v in line.grpc_libraries)]
    parts["knn"] = [
        _dep("org.opensearch.plugin", "opensearch-knn", line.knn_version, extra=no_transitive)
    ]
    for name, deps in parts.items():
        (work / name).mkdir(parents=True)
        (work / name / "pom.xml").write_text(_pom(f"gw-{name}", deps))
    modules = "".join(f"<module>{name}</module>" for name in parts)
    (work / "pom.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>groundwire.opensearch</groupId><artifactId>gw-reactor</artifactId>"
        f"<version>1</version><packaging>pom</packaging><modules>{modules}</modules></project>\n"
    )


def _descriptor(line: Line, name: str, description: str, classname: str, extended: str) -> str:
    return (
        f"name={name}\ndescription={description}\nversion={line.version}\n"
        f"opensearch.version={line.version}\njava.version={line.java_min}\n"
        f"classname={classname}\nextended.plugins={extended}\nhas.native.controller=false\n"
    )


def install(
    cache: Path | None = None,
    *,
    maven_repo_local: Path | None = None,
    line: Line | None = None,
) -> Path:
    """Lay out `line` (default `line_of()`) under `cache` (default `cache_root()`) once,
    and return its home (`<cache>/opensearch-<version>-r<revision>`). Idempotent;
    concurrent callers serialise on a file lock and the layout is built in a temporary
    folder renamed into place."""
    line = line or line_of()
    root = Path(cache) if cache is not None else cache_root()
    root.mkdir(parents=True, exist_ok=True)
    home = root / line.home_name
    marker = home / ".complete"
    if marker.exists():
        return home
    with (root / f".{line.home_name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return home
        started = time.monotonic()
        log(f"installing OpenSearch {line.version} + k-NN {line.knn_version} into {home}")
        work = Path(tempfile.mkdtemp(prefix=f".{line.home_name}-", dir=root))
        try:
            _resolve(line, work / "mvn", maven_repo_local)
            staged = work / "home"
            _lay_out(line, work / "mvn", staged)
            for path in [staged, *staged.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
            (staged / ".complete").write_text(f"{line.version} {line.knn_version}\n")
            if home.exists():  # a half-made layout from an interrupted run (no marker)
                shutil.rmtree(home)
            staged.rename(home)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        log(f"installed in {time.monotonic() - started:.1f}s ({_du(home) / 1e6:.0f} MB)")
        return home


def _resolve(line: Line, work: Path, maven_repo_local: Path | None) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("installing OpenSearch needs Maven (`mvn`) on PATH")
    _write_poms(line, work)
    cmd = [mvn, "-B", "-q", "-f", str(work / "pom.xml"), f"{DEPENDENCY_PLUGIN}:copy-dependencies"]
    repo = maven_repo_local or (
        Path(os.environ["GROUNDWIRE_MAVEN_REPO"])
        if os.environ.get("GROUNDWIRE_MAVEN_REPO")
        else None
    )
    if repo is not None:
        cmd.append(f"-Dmaven.repo.local={repo}")
    env = dict(os.environ, JAVA_HOME=str(java_home(line)))
    log("resolving artifacts with Maven (" + " ".join(cmd[1:]) + ")")
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"mvn failed ({proc.returncode}):\n{proc.stdout[-4000:]}")


def _artifact_name(jar: str) -> str:
    """`reactor-core-3.5.20.jar` -> `reactor-core` (the name without its version)."""
    parts = jar.removesuffix(".jar").split("-")
    for i, part in enumerate(parts):
        if i and part[:1].isdigit():
            return "-".join(parts[:i])
    return "-".join(parts)


def _lay_out(line: Line, work: Path, home: Path) -> None:
    (home / "bin").mkdir(parents=True)
    (home / "plugins").mkdir()
    shutil.copytree(work / "lib" / "out", home / "lib")
    in_lib = {_artifact_name(jar.name) for jar in (home / "lib").glob("*.jar")}
    for name, (_artifact, classname, extended, description, grants) in MODULES.items():
        target = home / "modules" / name
        _copy_module_jars(work / name / "out", target, in_lib)
        if line.major >= 3:  # 3.x renamed the modules' plugin classes
            classname = classname.removesuffix("Plugin") + "ModulePlugin"
        (target / "plugin-descriptor.properties").write_text(
            _descriptor(line, name, description, classname, extended)
        )
        if grants:
            body = "".join(f"  {grant}\n" for grant in grants)
            (target / "plugin-security.policy").write_text(f"grant {{\n{body}}};\n")
    zips = list((work / "knn" / "out").glob("opensearch-knn-*.zip"))
    if len(zips) != 1:
        raise RuntimeError(f"expected one k-NN zip, got {zips}")
    target = home / "plugins" / "opensearch-knn"
    with zipfile.ZipFile(zips[0]) as archive:
        archive.extractall(target)
    if not (target / "plugin-descriptor.properties").exists():
        raise RuntimeError("the k-NN zip has no plugin-descriptor.properties")
    if line.major >= 3:
        _grpc_stand_in(line, home, work / "transport-grpc" / "out", in_lib)


# k-NN 3.x extends the `transport-grpc` module (its query converter for gRPC search),
# which Maven Central does not serve. The stand-in module declares the types k-NN's
# converter names, so the plugin loads; groundwire speaks REST, and nothing calls them.
GRPC_STAND_IN: dict[str, str] = {
    "org/opensearch/transport/grpc/GrpcStandInPlugin.java": """
package org.opensearch.transport.grpc;
public class GrpcStandInPlugin extends org.opensearch.plugins.Plugin
    implements org.opensearch.plugins.ExtensiblePlugin {}
""",
    "org/opensearch/transport/grpc/spi/QueryBuilderProtoConverterRegistry.java": """
package org.opensearch.transport.grpc.spi;
public interface QueryBuilderProtoConverterRegistry {}
""",
    "org/opensearch/transport/grpc/spi/QueryBuilderProtoConverter.java": """
package org.opensearch.transport.grpc.spi;
public interface QueryBuilderProtoConverter {
  org.opensearch.protobufs.QueryContainer.QueryContainerCase getHandledQueryCase();
  org.opensearch.index.query.QueryBuilder fromProto(org.opensearch.protobufs.QueryContainer q);
  default void setRegistry(QueryBuilderProtoConverterRegistry registry) {}
}
""",
    "org/opensearch/protobufs/KnnQuery.java": """
package org.opensearch.protobufs;
public final class KnnQuery {}
""",
    "org/opensearch/protobufs/QueryContainer.java": """
package org.opensearch.protobufs;
public final class QueryContainer {
  public enum QueryContainerCase { KNN }
  public QueryContainerCase getQueryContainerCase() { throw new UnsupportedOperationException(); }
  public KnnQuery getKnn() { throw new UnsupportedOperationException(); }
}
""",
}


def _grpc_stand_in(line: Line, home: Path, libraries: Path, in_lib: set[str]) -> None:
    jdk = java_home(line) / "bin"
    target = home / "modules" / "transport-grpc"
    _copy_module_jars(libraries, target, in_lib)
    with tempfile.TemporaryDirectory() as tmp:
        src, classes = Path(tmp) / "src", Path(tmp) / "classes"
        for rel, body in GRPC_STAND_IN.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_text(body.lstrip())
        sources = [str(src / rel) for rel in GRPC_STAND_IN]
        for cmd in (
            [
                str(jdk / "javac"),
                "-nowarn",
                "-cp",
                f"{home / 'lib'}/*",
                "-d",
                str(classes),
                *sources,
            ],
            [str(jdk / "jar"), "--create", "--file", "tmp.jar", "-C", str(classes), "."],
        ):
            proc = subprocess.run(
                cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            if proc.returncode != 0:
                raise RuntimeError(f"{Path(cmd[0]).name} failed: {proc.stdout[-2000:]}")
        shutil.move(str(Path(tmp) / "tmp.jar"), target / "transport-grpc-stand-in.jar")
    (target / "plugin-descriptor.properties").write_text(
        _descriptor(
            line,
            "transport-grpc",
            "A stand-in for the gRPC transport's extension points (not served by Maven)",
            "org.opensearch.transport.grpc.GrpcStandInPlugin",
            "",
        )
    )


def _copy_module_jars(source: Path, target: Path, in_lib: set[str]) -> None:
    """A module's jars, less those the server already has in lib/ (any version: reindex
    pulls reactor-core): two copies would be jar hell, and lib's are the ones to keep."""
    shutil.copytree(source, target)
    for jar in target.glob("*.jar"):
        if _artifact_name(jar.name) in in_lib:
            jar.unlink()


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
