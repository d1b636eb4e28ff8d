"""The official Java client in tests: kafka-clients 4.x and its runtime jars (from compat-tests/setup.sh),
a check program compiled against them, and JVM flags that keep a short-lived check quick to start."""

import glob
import os
import shutil
import subprocess

JARS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat-tests", ".cache", "java4")
JAVA = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
MISSING = "needs a JDK and compat-tests/.cache/java4 (compat-tests/setup.sh)"


def java_available():
    return shutil.which("javac") and shutil.which("java") and glob.glob(os.path.join(JARS, "kafka-clients-*.jar"))


def compile_check(source: str, classes) -> str:
    """Compile the program `source` into the directory `classes`; returns the classpath that runs it."""
    classpath = os.pathsep.join([str(classes), os.path.join(JARS, "*")])
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath, source],
                   check=True, capture_output=True, timeout=120)
    return classpath
