"""The Quix Streams contender of bench/run: the same topologies as bench/sluice.

    python app.py passthrough|count BOOTSTRAP GROUP INPUT OUTPUT GUARANTEE STATE_DIR

passthrough: value upper-cased (bytes) -> OUTPUT, key kept. count: a stateful apply counts
per key in Quix's RocksDB state (with its changelog topic) and emits each updated count as a
decimal string. Commit interval as sluice's defaults (30 s, 0.1 s under exactly-once).
Runs until SIGTERM.
"""
import sys

from quixstreams import Application


def main() -> None:
    mode, bootstrap, group, input_topic, output_topic, guarantee, state_dir = sys.argv[1:8]
    eos = guarantee == "exactly_once"
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once" if eos else "at-least-once",
        commit_interval=0.1 if eos else 30.0,
        state_dir=state_dir,
        use_changelog_topics=True,
        auto_create_topics=True,
        loglevel="WARNING",
    )
    inp = app.topic(input_topic, key_deserializer="bytes", value_deserializer="bytes")
    if mode == "passthrough":
        out = app.topic(output_topic, key_serializer="bytes", value_serializer="bytes")
        sdf = app.dataframe(inp)
        sdf = sdf.apply(lambda v: v.upper())
    else:
        out = app.topic(output_topic, key_serializer="bytes", value_serializer="str")

        def count(_value, state):
            n = state.get("n", 0) + 1
            state.set("n", n)
            return str(n)

        sdf = app.dataframe(inp)
        sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(out)
    app.run()


if __name__ == "__main__":
    main()
