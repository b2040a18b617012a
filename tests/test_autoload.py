"""Plugin loading: `import torch` alone registers npu (torch.backends entry point);
TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off until `import torch_npu`."""


def test_import_torch_alone_loads_npu(run_python):
    proc = run_python(
        """
        import sys
        import torch
        assert "torch_npu" in sys.modules, "import torch must load the plugin"
        assert torch.npu.is_available()
        x = torch.randn(4, 4)
        y = x.npu()
        assert y.device.type == "npu" and y.is_npu
        torch.testing.assert_close((y @ y).cpu(), x @ x)
        m = torch.nn.Linear(4, 2).npu()
        torch.testing.assert_close(m(y).cpu(), torch.nn.functional.linear(x, m.weight.cpu(), m.bias.cpu()))
        torch.npu.synchronize()
        assert "npu:0" in torch.npu.memory_summary()
        print("OK")
        """
    )
    assert proc.stdout.strip().endswith("OK")


def test_autoload_disabled_requires_import_torch_npu(run_python):
    proc = run_python(
        """
        import sys
        import torch
        assert "torch_npu" not in sys.modules, "autoload is disabled"
        for make in (lambda: torch.empty(2, device="npu"), lambda: torch.randn(2).to("npu")):
            try:
                make()
            except RuntimeError:
                pass
            else:
                raise AssertionError("npu must be unknown before import torch_npu")
        import torch_npu
        x = torch.randn(3, 3)
        y = torch.empty(3, 3, device="npu")
        y.copy_(x)
        torch.testing.assert_close((y @ y).cpu(), x @ x)
        assert torch.npu.device_count() == 8
        print("OK")
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.stdout.strip().endswith("OK")


def test_import_torch_npu_twice_is_harmless(run_python):
    proc = run_python(
        """
        import importlib
        import torch
        import torch_npu
        importlib.reload(torch_npu)
        torch_npu._autoload()
        x = torch.arange(6.0)
        assert torch.equal((x.npu() * 2).cpu(), x * 2)
        assert torch._C._get_privateuse1_backend_name() == "npu"
        print("OK")
        """
    )
    assert proc.stdout.strip().endswith("OK")
