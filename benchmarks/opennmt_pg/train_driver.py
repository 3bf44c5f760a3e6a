# OpenNMT-py training, timed as synopsis' side is: the batches are built by OpenNMT's own pipeline first
# (not timed), then `steps` optimizer steps of its Trainer (after one untimed warm-up step) are timed.
import itertools
import json
import resource
import sys
import time

import patch  # noqa: F401  (sizes; see patch.py)
import torch
from onmt.bin.train import _get_parser
from onmt.constants import CorpusTask
from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
from onmt.model_builder import build_model
from onmt.models import build_model_saver
from onmt.train_single import _init_train, configure_process
from onmt.trainer import build_trainer
from onmt.utils.logging import init_logger
from onmt.utils.optimizers import Optimizer
from onmt.utils.parse import ArgumentParser

torch.set_num_threads(1)
steps, documents = int(sys.argv[1]), int(sys.argv[2])
opt = _get_parser().parse_args(sys.argv[3:])
ArgumentParser.validate_train_opts(opt)
ArgumentParser.update_model_opts(opt)
ArgumentParser.validate_model_opts(opt)
configure_process(opt, -1)
init_logger(opt.log_file)
checkpoint, vocabs, transforms_cls = _init_train(opt)
model = build_model(opt, opt, vocabs, None, -1)
optim = Optimizer.from_opt(model, opt, checkpoint=None)
saver = build_model_saver(opt, opt, model, vocabs, optim, -1)
trainer = build_trainer(opt, -1, model, vocabs, optim, model_saver=None)  # saved after the clock stops
train_iter = build_dynamic_dataset_iter(opt, transforms_cls, vocabs, task=CorpusTask.TRAIN, copy=True)
batches, rows = [], 0
for batch, bucket in train_iter:  # one epoch of the documents (all in one bucket), in OpenNMT's batches
    batches.append((batch, bucket))
    rows += len(batch["tgt"])
    if rows >= documents:
        break
pad = trainer.train_loss.padding_idx
tokens = [int(b["tgt"][:, 1:, 0].ne(pad).sum()) for b, _ in batches]
trainer.train(iter(batches[:1]), 1, save_checkpoint_steps=0)  # warm-up
cycle = itertools.islice(itertools.cycle(batches), steps)
start, cpu_start, process_start = time.perf_counter(), time.thread_time(), time.process_time()
trainer.train(cycle, 1 + steps, save_checkpoint_steps=0)
seconds = time.perf_counter() - start
cpu_seconds, process_cpu_seconds = time.thread_time() - cpu_start, time.process_time() - process_start
saver.save(1 + steps)
timed_tokens = sum(tokens[i % len(tokens)] for i in range(steps))
print(
    json.dumps(
        {
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "process_cpu_seconds": process_cpu_seconds,
            "steps": steps,
            "target_tokens": timed_tokens,
            "batches_per_epoch": len(batches),
            "documents": rows,
            "vocab": len(vocabs["tgt"]),
            "parameters": sum(p.numel() for p in model.parameters()),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }
    )
)
