# onmt_translate in 3.5.1 builds its input iterator without copy=True, so a copy-attention model fails with
# KeyError 'src_map'. This driver does what onmt_translate does, through OpenNMT's own functions, with
# copy=True, and times the translation alone (model loading excluded, as for synopsis; its data pipeline
# included, as synopsis' id encoding is).
import json
import resource
import sys
import time

import patch  # noqa: F401  (sizes; see patch.py)
import torch
from onmt.bin.translate import _get_parser
from onmt.constants import CorpusTask
from onmt.inference_engine import InferenceEnginePY
from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
from onmt.utils.parse import ArgumentParser

torch.set_num_threads(1)
opt = _get_parser().parse_args(sys.argv[1:])
ArgumentParser.validate_translate_opts(opt)
ArgumentParser._get_all_transform_translate(opt)
ArgumentParser._validate_transforms_opts(opt)
ArgumentParser.validate_translate_opts_dynamic(opt)
engine = InferenceEnginePY(opt)
infer_iter = build_dynamic_dataset_iter(
    opt, engine.transforms_cls, engine.vocabs, task=CorpusTask.INFER, device_id=engine.device_id, copy=True
)
start, cpu_start, process_start = time.perf_counter(), time.thread_time(), time.process_time()
engine._translate(infer_iter)
seconds = time.perf_counter() - start
print(
    json.dumps(
        {
            "seconds": seconds,
            "cpu_seconds": time.thread_time() - cpu_start,
            "process_cpu_seconds": time.process_time() - process_start,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }
    )
)
