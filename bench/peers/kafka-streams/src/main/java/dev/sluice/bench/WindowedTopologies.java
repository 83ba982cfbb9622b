// The windowed topologies of tests/integration/runtime/kafka_streams_windows_test.cpp in
// Kafka Streams 3.9: the test runs the same topologies in sluice on the same input topics
// and compares the output topics record for record.
//
//   java -jar bench-kafka-streams-1.jar windows BOOTSTRAP APP_ID PREFIX OUT_PREFIX STATE_DIR
//
// Reads PREFIX-events (String, String), PREFIX-left / PREFIX-right (streams, String,
// String) and PREFIX-tleft / PREFIX-tright (tables, String, String); writes
// OUT_PREFIX-<name> for every name below. Windowed keys in TimeWindowedSerializer /
// SessionWindowedSerializer layout (partitioned by the base key, as Kafka Streams does for
// windowed sinks), counts as Long (8 bytes big-endian), strings as UTF-8. The record cache
// is off so every update comes out; at_least_once with a 100 ms commit interval. Runs until
// SIGTERM.
package dev.sluice.bench;

import java.time.Duration;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

final class WindowedTopologies {
  private WindowedTopologies() {}

  static String show(String v) { return v == null ? "null" : v; }

  static void build(StreamsBuilder b, String in, String out) {
    Serde<String> s = Serdes.String();
    Serde<Windowed<String>> timeWindowed = WindowedSerdes.timeWindowedSerdeFrom(String.class, 100);
    Serde<Windowed<String>> sessionWindowed = WindowedSerdes.sessionWindowedSerdeFrom(String.class);

    KStream<String, String> events = b.stream(in + "-events", Consumed.with(s, s));
    KGroupedStream<String, String> byKey = events.groupByKey(Grouped.with(s, s));

    KTable<Windowed<String>, Long> tumblingCount =
        byKey.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(100), Duration.ofMillis(50)))
            .count(Materialized.as("tumbling-count"));
    tumblingCount.toStream().to(out + "-tumbling-count", Produced.with(timeWindowed, Serdes.Long()));

    byKey.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(100), Duration.ofMillis(50)).advanceBy(Duration.ofMillis(50)))
        .aggregate(() -> "", (k, v, agg) -> agg + v + ",",
                   Materialized.<String, String, WindowStore<Bytes, byte[]>>as("hopping-aggregate").withValueSerde(s))
        .toStream()
        .to(out + "-hopping-aggregate", Produced.with(timeWindowed, s));

    KTable<Windowed<String>, Long> slidingCount =
        byKey.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(100), Duration.ofMillis(50)))
            .count(Materialized.as("sliding-count"));
    slidingCount.toStream().to(out + "-sliding-count", Produced.with(timeWindowed, Serdes.Long()));

    KTable<Windowed<String>, Long> sessionCount =
        byKey.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(50), Duration.ofMillis(50)))
            .count(Materialized.as("session-count"));
    sessionCount.toStream().to(out + "-session-count", Produced.with(sessionWindowed, Serdes.Long()));

    KTable<Windowed<String>, Long> suppressedCount =
        byKey.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(100), Duration.ofMillis(50)))
            .count(Materialized.as("suppressed-count"))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
    suppressedCount.toStream().to(out + "-suppressed-count", Produced.with(timeWindowed, Serdes.Long()));

    // Aggregations without windows: an update is stamped with the later of its record's
    // timestamp and the aggregate's, so an out-of-order record keeps the aggregate's.
    byKey.count(Materialized.as("plain-count")).toStream().to(out + "-plain-count", Produced.with(s, Serdes.Long()));
    byKey.aggregate(() -> "", (k, v, agg) -> agg + v + ",",
                    Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("plain-aggregate").withValueSerde(s))
        .toStream()
        .to(out + "-plain-aggregate", Produced.with(s, s));

    KTable<Windowed<String>, String> tumblingReduce =
        byKey.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(100), Duration.ofMillis(50)))
            .reduce((agg, v) -> agg + "," + v,
                    Materialized.<String, String, WindowStore<Bytes, byte[]>>as("tumbling-reduce").withValueSerde(s));
    tumblingCount
        .join(tumblingReduce, (n, vs) -> n + ":" + vs,
              Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>as("windowed-table-join")
                  .withKeySerde(timeWindowed).withValueSerde(s))
        .toStream()
        .to(out + "-windowed-table-join", Produced.with(timeWindowed, s));
    // A suppressed table on a join's side: a window its buffer holds answers with what the
    // suppression has emitted for it: nothing for a reduce's window before it closes.
    tumblingCount
        .leftJoin(tumblingReduce.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())),
                  (n, vs) -> n + "=" + show(vs),
                  Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>as("suppressed-table-join")
                      .withKeySerde(timeWindowed).withValueSerde(s))
        .toStream()
        .to(out + "-suppressed-table-join", Produced.with(timeWindowed, s));
    // A count's window held and never emitted answers the old value the count passed when it
    // created the window: 0, or for a sliding left window seeded from an earlier window, that
    // window's count. The counts were added before the reduces, so they take each record first.
    tumblingReduce
        .leftJoin(suppressedCount, (vs, n) -> vs + "=" + (n == null ? "null" : n.toString()),
                  Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>as("suppressed-count-join")
                      .withKeySerde(timeWindowed).withValueSerde(s))
        .toStream()
        .to(out + "-suppressed-count-join", Produced.with(timeWindowed, s));
    byKey.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(100), Duration.ofMillis(50)))
        .reduce((agg, v) -> agg + "," + v,
                Materialized.<String, String, WindowStore<Bytes, byte[]>>as("sliding-reduce").withValueSerde(s))
        .leftJoin(slidingCount.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())),
                  (vs, n) -> vs + "=" + (n == null ? "null" : n.toString()),
                  Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>as("suppressed-sliding-count-join")
                      .withKeySerde(timeWindowed).withValueSerde(s))
        .toStream()
        .to(out + "-suppressed-sliding-count-join", Produced.with(timeWindowed, s));
    // A table suppressed twice: the outer buffer's prior value of a window is the old value
    // the inner one emits it with, that of the latest update the inner one held for it.
    tumblingReduce
        .leftJoin(tumblingCount.suppress(Suppressed.untilTimeLimit(Duration.ofMillis(100), Suppressed.BufferConfig.unbounded()))
                      .suppress(Suppressed.untilTimeLimit(Duration.ofMillis(200), Suppressed.BufferConfig.unbounded())),
                  (vs, n) -> vs + "=" + (n == null ? "null" : n.toString()),
                  Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>as("double-suppressed-count-join")
                      .withKeySerde(timeWindowed).withValueSerde(s))
        .toStream()
        .to(out + "-double-suppressed-count-join", Produced.with(timeWindowed, s));
    KTable<Windowed<String>, String> sessionReduce =
        byKey.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(50), Duration.ofMillis(50)))
            .reduce((agg, v) -> agg + "," + v,
                    Materialized.<String, String, SessionStore<Bytes, byte[]>>as("session-reduce").withValueSerde(s));
    sessionCount
        .outerJoin(sessionReduce, (n, vs) -> (n == null ? "null" : n.toString()) + "+" + show(vs),
                   Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>as("session-table-join")
                       .withKeySerde(sessionWindowed).withValueSerde(s))
        .toStream()
        .to(out + "-session-table-join", Produced.with(sessionWindowed, s));

    KStream<String, String> left = b.stream(in + "-left", Consumed.with(s, s));
    KStream<String, String> right = b.stream(in + "-right", Consumed.with(s, s));
    JoinWindows within = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(50), Duration.ofMillis(20));
    left.join(right, (l, r) -> l + "+" + r, within, StreamJoined.with(s, s, s).withStoreName("inner-join"))
        .to(out + "-stream-inner-join", Produced.with(s, s));
    left.outerJoin(right, (l, r) -> show(l) + "+" + show(r), within, StreamJoined.with(s, s, s).withStoreName("outer-join"))
        .to(out + "-stream-outer-join", Produced.with(s, s));
    left.outerJoin(right, (l, r) -> show(l) + "+" + show(r), within.before(Duration.ofMillis(10)).after(Duration.ofMillis(40)),
                   StreamJoined.with(s, s, s).withStoreName("asymmetric-outer-join"))
        .to(out + "-stream-asymmetric-outer-join", Produced.with(s, s));

    KTable<String, String> tleft = b.table(in + "-tleft", Consumed.with(s, s),
                                           Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("tleft-store"));
    KTable<String, String> tright = b.table(in + "-tright", Consumed.with(s, s),
                                            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("tright-store"));
    tleft.outerJoin(tright, (l, r) -> show(l) + "+" + show(r),
                    Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("table-outer-join").withValueSerde(s))
        .toStream()
        .to(out + "-table-outer-join", Produced.with(s, s));
    // The table updates arrive out of timestamp order: a result carries the later of its
    // update's timestamp and the other side's stored value's.
    tleft.join(tright, (l, r) -> l + "+" + r,
               Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("table-inner-join").withValueSerde(s))
        .toStream()
        .to(out + "-table-inner-join", Produced.with(s, s));
    tleft.leftJoin(tright, (l, r) -> l + "+" + show(r),
                   Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("table-left-join").withValueSerde(s))
        .toStream()
        .to(out + "-table-left-join", Produced.with(s, s));
  }
}
