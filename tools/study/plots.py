"""The study's PNG plots, drawn by gnuplot (Debian gnuplot-nox) in the seed's style: a
metric against batch size at a fixed resolution and against resolution at a fixed
batch size, log2 x axes, one line per implementation, evaluation and training side by
side. The data files and scripts are written to a temporary folder; only the PNGs
are kept. Standard library only."""
import os
import shutil
import subprocess
import tempfile

from study_data import IMPL_ORDER

# (file stem, row key, y label, log y) of each plotted metric.
METRICS = [
    ("ms_per_sample", "ms_per_sample", "ms per sample (median device time / batch)", True),
    ("peak_memory", "peak_mib", "peak memory (MiB, caching allocator)", True),
    ("gpu_util", "gpu_util_pct", "GPU utilisation (%, NVML)", False),
    ("energy", "energy_mj_per_sample", "energy per sample (mJ, NVML)", True),
]
SEED_PLOTTED = ["pytorch", "cudnn"]  # the seed's two ends, dashed, on the ms-per-sample plots


def have_gnuplot():
    return shutil.which("gnuplot") is not None


def _series(card, key, kind, axis, fixed):
    """x values and {impl: {x: y}} for the line at the fixed other axis."""
    xs, lines = set(), {}
    for r in card.rows:
        if r["kind"] != kind or r["status"] != "ok" or r.get(key) is None:
            continue
        b, res = r["batch"], r["resolution"]
        if (axis == "batch" and res != fixed) or (axis == "resolution" and b != fixed):
            continue
        x = b if axis == "batch" else res
        xs.add(x)
        lines.setdefault(r["impl"], {})[x] = r[key]
    return sorted(xs), lines


def _write_dat(path, xs, lines, names):
    with open(path, "w") as f:
        f.write("x " + " ".join(names) + "\n")
        for x in xs:
            vals = [lines[n].get(x) for n in names]
            f.write(f"{x} " + " ".join("NaN" if v is None else f"{v:.6g}" for v in vals) + "\n")


def draw(card, out_dir, seed=None, sweep_resolution=32, sweep_batch=32):
    """Writes out_dir/<metric>_vs_<axis>.png; returns [(title, file name)]."""
    os.makedirs(out_dir, exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for stem, key, ylabel, logy in METRICS:
            for axis, fixed in (("batch", sweep_resolution), ("resolution", sweep_batch)):
                panels = []
                for kind in ("eval", "train"):
                    xs, lines = _series(card, key, kind, axis, fixed)
                    names = [i for i in IMPL_ORDER if i in lines] + sorted(set(lines) - set(IMPL_ORDER))
                    if stem == "ms_per_sample" and seed:
                        for impl in SEED_PLOTTED:
                            pts = {(b if axis == "batch" else r): v["ms_per_sample"]
                                   for (i, k, b, r), v in seed.items()
                                   if i == impl and k == kind and (r if axis == "batch" else b) == fixed}
                            if pts:
                                lines[f"seed_{impl}_V100"] = pts
                                names.append(f"seed_{impl}_V100")
                                xs = sorted(set(xs) | set(pts))
                    if not xs or not names:
                        continue
                    dat = os.path.join(tmp, f"{stem}_{axis}_{kind}.dat")
                    _write_dat(dat, xs, lines, names)
                    panels.append((kind, dat, names))
                if not panels:
                    continue
                png = f"{stem}_vs_{axis}.png"
                other = f"resolution {fixed}" if axis == "batch" else f"batch {fixed}"
                title = f"{ylabel.split(' (')[0]} vs {axis} ({other})"
                script = [
                    "set terminal pngcairo size 1400,520 font ',10'",
                    f"set output '{os.path.join(out_dir, png)}'",
                    "set datafile missing 'NaN'",
                    f"set multiplot layout 1,{len(panels)} title '{card.device_name()}: {title}'",
                    "set logscale x 2", "set grid", f"set xlabel '{axis}'", f"set ylabel '{ylabel}'",
                    "set key top right font ',8'", "set key noenhanced",
                    "set logscale y" if logy else "unset logscale y",
                ]
                if stem == "gpu_util":
                    script.append("set yrange [0:105]")
                for kind, dat, names in panels:
                    plots = []
                    for n, name in enumerate(names):
                        dash = "dt 2 " if name.startswith("seed_") else ""
                        plots.append(f"'{dat}' using 1:{n + 2} with linespoints {dash}lw 1.5 pt {n % 12 + 1} "
                                     f"title '{name}'")
                    script += [f"set title '{'evaluation' if kind == 'eval' else 'training'}' noenhanced",
                               "plot " + ", ".join(plots)]
                script.append("unset multiplot")
                gp = os.path.join(tmp, png + ".gp")
                with open(gp, "w") as f:
                    f.write("\n".join(script) + "\n")
                subprocess.run(["gnuplot", gp], check=True, capture_output=True, text=True)
                made.append((title, png))
    return made
