#!/usr/bin/env python3
"""`pip install` as a user does it, offline: builds the wheel from the clone with the system's torch, installs it into
a fresh venv that sees that torch (--system-site-packages), and runs the entry points from a folder outside the
clone with nothing on PYTHONPATH: `memrec record`, `python -m memrec`, `import memrec`, `memrec run`, the notebook
magics (test_notebook.py) and, when given, a libtorch C++ program through the packaged preload library. The wheel
holds only what the package installs, stripped of debug info.

    test_pip.py --source CLONE --python /usr/bin/python3 [--cpp-program PROGRAM]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile


def fail(message):
    sys.exit(f"test_pip: {message}")


def run(*args, cwd=None, env=None, expect=0):
    """Runs a command; returns (stdout, stderr). Fails the test, showing both, when its status is not `expect`."""
    print("$", " ".join(args), flush=True)
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != expect:
        fail(f"{' '.join(args)} exited with {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout, done.stderr


def check_wheel(wheel, folder):
    """Its programs are memrec and memrec-run, and no ELF file in it (programs, preload libraries, the module)
    keeps debug sections."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        programs = sorted(n for n in names if n.startswith("memrec/bin/"))
        if programs != ["memrec/bin/memrec", "memrec/bin/memrec-run"]:
            fail(f"the wheel's programs should be memrec and memrec-run: {programs}")
        for name in names:
            if name in programs or name.endswith(".so"):
                sections, _ = run("readelf", "--section-headers", "--wide", z.extract(name, folder))
                if ".debug_" in sections:
                    fail(f"{name} in the wheel keeps debug sections: setup.py installs stripped binaries")
    print(f"wheel: {os.path.getsize(wheel)} bytes")


def build_and_install(source, python, folder):
    dist, venv = os.path.join(folder, "dist"), os.path.join(folder, "venv")
    run(python, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, source)
    wheels = glob.glob(os.path.join(dist, "memrec-*.whl"))
    if len(wheels) != 1:
        fail(f"expected one wheel in {dist}: {wheels}")
    check_wheel(wheels[0], os.path.join(folder, "unzipped"))
    run(python, "-m", "venv", "--system-site-packages", venv)
    run(os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", wheels[0])
    return venv


def user_environment(venv):
    """An activated venv: its bin first on PATH, nothing of the clone or the build on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MEMREC"))}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env["PATH"]
    env["VIRTUAL_ENV"] = venv
    env["OMP_NUM_THREADS"] = "1"
    return env


def peak(path, cwd, env):
    out, _ = run("python", "-m", "memrec", "stats", path, "--json", cwd=cwd, env=env)
    return json.loads(out)["peak_allocated"]["bytes"]


def check_entry_points(source, venv, cwd, env):
    train = [os.path.join(source, "examples", "train.py"), "--steps", "2", "--layers", "2"]
    out, _ = run("python", "-c", "import memrec, sys; print(memrec.__file__, 'torch' in sys.modules)", cwd=cwd, env=env)
    if not out.startswith(venv) or not out.strip().endswith("False"):
        fail(f"import memrec should load the venv's package without torch: {out}")
    _, err = run("memrec", "record", "-o", "x.memrec", "--", "python", *train, cwd=cwd, env=env)
    if "x.memrec (" not in err:
        fail(f"memrec record did not write x.memrec: {err}")
    out, _ = run("python", "-m", "memrec", "info", "x.memrec", cwd=cwd, env=env)
    if "alloc" not in out:
        fail(f"python -m memrec info printed no events: {out}")
    _, err = run("python", "-m", "memrec", "record", "-o", "y.memrec", *train, cwd=cwd, env=env)
    if "y.memrec (" not in err or peak("y.memrec", cwd, env) != peak("x.memrec", cwd, env):
        fail(f"python -m memrec record train.py should record what memrec record -- python train.py does: {err}")
    out, _ = run("python", "-m", "memrec", "info", "y.memrec", cwd=cwd, env=env)
    if os.path.join(venv, "bin", "python") not in out:
        fail(f"python -m memrec record should run the script with {venv}/bin/python: {out}")
    out, err = run("memrec", "run", "mlp", "--steps", "1", "-o", "run.memrec", cwd=cwd, env=env)
    if "wrote run.memrec" not in out:
        fail(f"memrec run (memrec-run in the package) wrote nothing: {out}{err}")


def check_cpp_program(program, cwd, env):
    _, err = run("memrec", "record", "-o", "cpp.memrec", "--", program, cwd=cwd, env=env)
    if "cpp.memrec (" not in err:
        fail(f"the packaged preload library did not record {program}: {err}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--cpp-program")
    a = p.parse_args()
    source = os.path.abspath(a.source)
    with tempfile.TemporaryDirectory(prefix="memrec-pip-") as folder:
        venv = build_and_install(source, a.python, folder)
        work = os.path.join(folder, "work")
        os.mkdir(work)
        env = user_environment(venv)
        check_entry_points(source, venv, work, env)
        if a.cpp_program:
            check_cpp_program(os.path.abspath(a.cpp_program), work, env)
        run("python", os.path.join(source, "tests", "python", "test_notebook.py"), cwd=work, env=env)
    print("pip ok: memrec record, python -m memrec, import memrec, memrec run and the magics work from the venv")


if __name__ == "__main__":
    main()
