"""cmake --install (component ina_torch) puts ina_torch under <prefix>/lib/python3/dist-packages
(Debian's path), and the installed copy imports and registers backend "ina" without the build
tree. Only the component: the rest of the build need not be there (scripts/torch2-chroot.sh
builds only what the torch tests use)."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ.get("INA_BUILD_DIR", "build")


class InstallTest(unittest.TestCase):
    def test_installed_package_imports(self):
        prefix = tempfile.mkdtemp(prefix="ina_torch_install_")
        try:
            subprocess.run(["cmake", "--install", BUILD, "--component", "ina_torch", "--prefix",
                            prefix], check=True, stdout=subprocess.DEVNULL)
            dirs = glob.glob(os.path.join(prefix, "lib*", "python3", "dist-packages", "ina_torch"))
            dirs += glob.glob(os.path.join(prefix, "lib", "*", "python3", "dist-packages",
                                           "ina_torch"))
            self.assertEqual(len(dirs), 1, f"ina_torch not installed under {prefix}: {dirs}")
            pkg = dirs[0]
            self.assertTrue(os.path.isfile(os.path.join(pkg, "__init__.py")))
            self.assertEqual(len(glob.glob(os.path.join(pkg, "_C*.so"))), 1)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = os.path.dirname(pkg)
            r = subprocess.run([sys.executable, "-c",
                                "import ina_torch, torch.distributed as d; "
                                "print(ina_torch.__file__, d.Backend('ina'))"],
                               env=env, cwd=prefix, capture_output=True, text=True, timeout=120)
            print(r.stdout, r.stderr)
            self.assertEqual(r.returncode, 0)
            self.assertTrue(r.stdout.startswith(pkg), r.stdout)
            self.assertIn(" ina", r.stdout)
        finally:
            shutil.rmtree(prefix, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
