"""Merge per-variant runs (launched as separate processes for time) into one table/JSON/PNGs."""
import json, os, sys
from pathlib import Path
from synopsis.config import load_config
from synopsis.experiments import hibrids_scisummnet as H
from synopsis.io import write_json
from synopsis.training.objectives import METRICS

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
cfg = load_config(H.HibridsExperimentConfig, Path("configs/hibrids_scisummnet.yaml"))
rows, biases, runs, split = [], {}, {}, None
for v in cfg.variants:
    d = Path(f"/tmp/hb_{v}") if v != "base" else Path("/tmp/hb_real2")
    res = d / "results.json"
    if res.is_file() and any(r["variant"] == v for r in json.loads(res.read_text())["rows"]):
        data = json.loads(res.read_text())
        rows += [r for r in data["rows"] if r["variant"] == v]
        biases.update({k: b for k, b in data["biases"].items() if k == v})
        runs[v] = data["run"]; split = data["split"]
        continue
    hist = d / "runs" / v / "history.json"
    if not hist.is_file():
        print("missing", v); continue
    dev = json.loads(hist.read_text())["dev"]
    best = max(dev, key=lambda x: x[1]["average"])
    secs = hist.stat().st_mtime - (d / "models" / "base" / "model.safetensors").stat().st_mtime
    rows.append({"variant": v, **{m: best[1][m] for m in METRICS}, "average": best[1]["average"],
                 "dev_loss": min(x[1]["loss"] for x in dev), "final_dev_loss": dev[-1][1]["loss"],
                 "best_step": best[0], "steps": dev[-1][0], "seconds": round(secs, 1),
                 "seconds_note": "from file times (base model written -> history written)"})
    if v.startswith("hibrids"):
        biases[v] = H.learned_biases(d / "runs" / v / "checkpoints")
walls = [r["wall_seconds"] for r in runs.values()]
run = {"wall_seconds": max(walls + [r["seconds"] for r in rows]),
       "loadavg_before": min((r["loadavg_before"] for r in runs.values()), default=os.getloadavg()),
       "loadavg_after": os.getloadavg(), "processes": runs,
       "note": "variants ran as separate processes (base alone; sectok, hibrids-enc, hibrids-dec in parallel, 1 thread each) from one saved base model"}
if split is None:
    split = json.loads((Path("/tmp/hb_hibrids-enc") / "results.json").read_text())["split"]
table = H._table(cfg, rows, biases, split, run)
write_json(out / "results.json", {"config": H.to_dict(cfg), "split": split, "run": run, "rows": rows, "biases": biases})
(out / "table.md").write_text(table)
H._plot_scores(rows, out / "scores.png"); H._plot_biases(biases, out / "bias_heatmap.png")
print(table)
