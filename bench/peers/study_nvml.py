"""NVML through ctypes (libnvidia-ml.so.1 loaded at run time, no nvml.h, no pynvml):
the Python twin of bench/study/nvml.{h,cpp}, with the same fields, so the study's
peers report utilisation, power, energy and memory the way strata's driver does.

    nv = Nvml.open(pci_bus_id)   # "" -> NVML device 0; nv.ok, nv.error say why not
    w = nv.begin()               # energy counter and newest sample times
    ... timed steps ...
    r = nv.end(w)                # dict: energy_mj, gpu_util_pct, util_samples,
                                 # power_w, power_samples, mem_used_bytes, window_s

Utilisation is read from the driver's sample buffer (nvmlDeviceGetSamples), not by a
polling thread, so a host-bound Python step is not slowed by it. Standard library only.
"""
import ctypes
import time

_SUCCESS = 0
_POWER_SAMPLES = 0      # NVML_TOTAL_POWER_SAMPLES, mW
_GPU_UTIL_SAMPLES = 1   # NVML_GPU_UTILIZATION_SAMPLES, %


class _Value(ctypes.Union):
    _fields_ = [("d", ctypes.c_double), ("ui", ctypes.c_uint), ("ul", ctypes.c_ulong),
                ("ull", ctypes.c_ulonglong), ("sll", ctypes.c_longlong), ("si", ctypes.c_int)]


class _Sample(ctypes.Structure):
    _fields_ = [("ts", ctypes.c_ulonglong), ("v", _Value)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def _as_float(v, kind):
    return {0: v.d, 1: v.ui, 2: v.ul, 3: v.ull, 4: v.sll, 5: v.si}.get(kind, 0.0)


class Nvml:
    _instance = None

    @classmethod
    def open(cls, pci_bus_id=""):
        if cls._instance is None:
            cls._instance = cls(pci_bus_id)
        return cls._instance

    def __init__(self, pci_bus_id=""):
        self.ok, self.error, self.name, self.driver = False, "", "", ""
        self._dev = ctypes.c_void_p()
        try:
            self._lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as e:
            self.error = f"libnvidia-ml.so.1 not loadable: {e}"
            return
        lib = self._lib
        lib.nvmlErrorString.restype = ctypes.c_char_p
        r = lib.nvmlInit_v2()
        if r != _SUCCESS:
            self.error = f"nvmlInit_v2: {lib.nvmlErrorString(r).decode()}"
            return
        r = -1
        if pci_bus_id and hasattr(lib, "nvmlDeviceGetHandleByPciBusId_v2"):
            r = lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(self._dev))
        if r != _SUCCESS:
            r = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self._dev))
            if r != _SUCCESS:
                self.error = f"nvmlDeviceGetHandleByIndex_v2(0): {lib.nvmlErrorString(r).decode()}"
                return
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlDeviceGetName(self._dev, buf, 96) == _SUCCESS:
            self.name = buf.value.decode()
        if lib.nvmlSystemGetDriverVersion(buf, 96) == _SUCCESS:
            self.driver = buf.value.decode()
        self.ok = True

    def energy_mj(self):
        e = ctypes.c_ulonglong()
        if not self.ok or not hasattr(self._lib, "nvmlDeviceGetTotalEnergyConsumption"):
            return None
        return e.value if self._lib.nvmlDeviceGetTotalEnergyConsumption(self._dev, ctypes.byref(e)) == _SUCCESS else None

    def memory(self):
        m = _Memory()
        if not self.ok or self._lib.nvmlDeviceGetMemoryInfo(self._dev, ctypes.byref(m)) != _SUCCESS:
            return None
        return m

    def _newer(self, kind, since):
        """Samples newer than `since` (driver µs); [] when none or unsupported."""
        if not self.ok or not hasattr(self._lib, "nvmlDeviceGetSamples"):
            return [], 0
        vtype, n = ctypes.c_int(), ctypes.c_uint(0)
        if self._lib.nvmlDeviceGetSamples(self._dev, kind, ctypes.c_ulonglong(since), ctypes.byref(vtype),
                                          ctypes.byref(n), None) != _SUCCESS or n.value == 0:
            return [], 0
        buf = (_Sample * (n.value + 16))()  # more may arrive between the two calls
        n = ctypes.c_uint(n.value + 16)
        if self._lib.nvmlDeviceGetSamples(self._dev, kind, ctypes.c_ulonglong(since), ctypes.byref(vtype),
                                          ctypes.byref(n), buf) != _SUCCESS:
            return [], 0
        return list(buf[:n.value]), vtype.value

    def begin(self):
        w = {"t0": time.perf_counter(), "util_ts": 0, "power_ts": 0, "energy_mj": None}
        for key, kind in (("util_ts", _GPU_UTIL_SAMPLES), ("power_ts", _POWER_SAMPLES)):
            samples, _ = self._newer(kind, 0)
            w[key] = max((s.ts for s in samples), default=0)
        w["energy_mj"] = self.energy_mj()  # last, closest to the first timed step
        return w

    def end(self, w):
        e1 = self.energy_mj()  # first, closest to the last timed step
        r = {"window_s": time.perf_counter() - w["t0"], "energy_mj": None, "gpu_util_pct": None, "util_samples": 0,
             "power_w": None, "power_samples": 0, "mem_used_bytes": None}
        if not self.ok:
            return r
        if e1 is not None and w["energy_mj"] is not None:
            r["energy_mj"] = float(e1 - w["energy_mj"])
        samples, kind = self._newer(_GPU_UTIL_SAMPLES, w["util_ts"])
        if samples:
            r["gpu_util_pct"] = sum(_as_float(s.v, kind) for s in samples) / len(samples)
            r["util_samples"] = len(samples)
        samples, kind = self._newer(_POWER_SAMPLES, w["power_ts"])
        if samples:
            r["power_w"] = sum(_as_float(s.v, kind) for s in samples) / len(samples) / 1000.0
            r["power_samples"] = len(samples)
        m = self.memory()
        r["mem_used_bytes"] = m.used if m else None
        return r

    def info(self):
        if not self.ok:
            return {"ok": False, "error": self.error}
        m = self.memory()
        return {"ok": True, "name": self.name, "driver": self.driver, "mem_total_bytes": m.total if m else None}
