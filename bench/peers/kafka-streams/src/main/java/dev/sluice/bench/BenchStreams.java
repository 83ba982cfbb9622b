// The Kafka Streams contender of bench/run: the same topologies as bench/sluice.
//
//   java -jar bench-kafka-streams-1.jar passthrough|count BOOTSTRAP APP_ID INPUT OUTPUT GUARANTEE STATE_DIR [report-running]
//   java -jar bench-kafka-streams-1.jar restore BOOTSTRAP APP_ID RECORDS PARTITIONS STATE_DIR
//   java -jar bench-kafka-streams-1.jar windows BOOTSTRAP APP_ID PREFIX OUT_PREFIX STATE_DIR
//
// passthrough: mapValues(ASCII upper-case) -> OUTPUT. count: groupByKey().count("bench-counts")
// -> OUTPUT (Long, big-endian). Record cache off (statestore.cache.max.bytes=0), commit
// interval as sluice's defaults (30000 ms, 100 ms under exactly-once). Runs until SIGTERM.
// report-running: when the client first reaches RUNNING, print {"running":true,"restored":N} to
// stdout, N the changelog records restored before it, and join the group under a static
// group.instance.id (bench/run's restart workload).
// restore: fills the count store's changelog with RECORDS distinct keys, starts a fresh
// instance and prints the seconds from start() to RUNNING as JSON, with the CPU seconds the
// process (every thread: stream, consumer, RocksDB, JIT, GC) used meanwhile and its peak RSS
// meanwhile (the kernel's VmHWM, reset after the fill).
// windows: the windowed topologies the integration test compares with sluice
// (WindowedTopologies), at_least_once with a 100 ms commit interval.
package dev.sluice.bench;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;

public final class BenchStreams {
  static Properties props(String bootstrap, String appId, String guarantee, String stateDir) {
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    boolean eos = guarantee.equals("exactly_once");
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, eos ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, eos ? 100 : 30000);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
    p.put("consumer.auto.offset.reset", "earliest");
    return p;
  }

  static String upper(String v) {
    char[] c = v.toCharArray();
    for (int i = 0; i < c.length; i++) if (c[i] >= 'a' && c[i] <= 'z') c[i] = (char) (c[i] - 'a' + 'A');
    return new String(c);
  }

  static void countTopology(StreamsBuilder b, String input, String output) {
    b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .groupByKey()
        .count(Materialized.as("bench-counts"))
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
  }

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    if (mode.equals("restore")) {
      restore(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]), args[5]);
      return;
    }
    String bootstrap = args[1], appId = args[2], input = args[3], output = args[4];
    boolean windows = mode.equals("windows");
    String guarantee = windows ? "at_least_once" : args[5], stateDir = windows ? args[5] : args[6];
    StreamsBuilder b = new StreamsBuilder();
    Properties config = props(bootstrap, appId, guarantee, stateDir);
    if (windows) {
      config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
      // Outer stream-stream joins emit unmatched records when stream time closes their
      // window, not at most once per wall-clock second (sluice has no such throttle).
      config.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
      WindowedTopologies.build(b, input, output);
    } else if (mode.equals("passthrough")) {
      KStream<String, String> s = b.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
      s.mapValues(BenchStreams::upper).to(output, Produced.with(Serdes.String(), Serdes.String()));
    } else {
      countTopology(b, input, output);
    }
    boolean report = args.length > 7 && args[7].equals("report-running");
    // A restarted instance rejoins at once under its static id, as sluice's does, rather than
    // waiting for the killed member's session to time out.
    if (report) config.put(StreamsConfig.mainConsumerPrefix("group.instance.id"), appId);
    KafkaStreams streams = new KafkaStreams(b.build(), config);
    if (report) reportRunning(streams);
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close();
      done.countDown();
    }));
    streams.setUncaughtExceptionHandler(e -> {
      e.printStackTrace();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.start();
    done.await();
  }

  /** The changelog records the client restores, counted as each store partition finishes. */
  static AtomicLong countRestored(KafkaStreams streams) {
    AtomicLong restored = new AtomicLong();
    streams.setGlobalStateRestoreListener(new StateRestoreListener() {
      @Override public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}
      @Override public void onBatchRestored(TopicPartition tp, String store, long end, long n) {}
      @Override public void onRestoreEnd(TopicPartition tp, String store, long total) { restored.addAndGet(total); }
    });
    return restored;
  }

  /** Prints one JSON line when the client first reaches RUNNING, with the records restored before. */
  static void reportRunning(KafkaStreams streams) {
    AtomicLong restored = countRestored(streams);
    AtomicBoolean reported = new AtomicBoolean();
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.RUNNING && !reported.getAndSet(true)) {
        System.out.printf("{\"running\":true,\"restored\":%d}%n", restored.get());
        System.out.flush();
      }
    });
  }

  /** Resets the kernel's peak RSS of this process (VmHWM) so the restore's is measured without the fill's. */
  static void resetPeakRss() {
    System.gc();  // what the fill's producer left goes first (G1 gives free heap back after a full GC)
    try (java.io.FileWriter w = new java.io.FileWriter("/proc/self/clear_refs")) {
      w.write("5");
    } catch (java.io.IOException e) {
      // not Linux 4.0+: the peak then includes the fill
    }
  }

  /** VmHWM of /proc/self/status in MB: the peak RSS since resetPeakRss(). */
  static double peakRssMbSinceReset() throws java.io.IOException {
    for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) return Double.parseDouble(line.substring(6).replace("kB", "").trim()) / 1024.0;
    }
    return 0;
  }

  static void restore(String bootstrap, String appId, long records, int partitions, String stateDir) throws Exception {
    String input = appId + "-in", output = appId + "-out", changelog = appId + "-bench-counts-changelog";
    Properties ap = new Properties();
    ap.put("bootstrap.servers", bootstrap);
    try (Admin admin = Admin.create(ap)) {
      List<NewTopic> topics = new ArrayList<>();
      topics.add(new NewTopic(input, partitions, (short) 1));
      topics.add(new NewTopic(output, partitions, (short) 1));
      topics.add(new NewTopic(changelog, partitions, (short) 1).configs(Map.of("cleanup.policy", "compact")));
      admin.createTopics(topics).all().get();
    }
    long fillStart = System.nanoTime();
    Properties pp = new Properties();
    pp.put("bootstrap.servers", bootstrap);
    pp.put("linger.ms", 20);
    pp.put("batch.size", 262144);
    try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (long i = 0; i < records; i++) {
        byte[] key = ("w" + i).getBytes();
        byte[] value = ByteBuffer.allocate(8).putLong(1 + i % 97).array();
        p.send(new ProducerRecord<>(changelog, (int) (i % partitions), key, value));
      }
      p.flush();
    }
    double fillS = (System.nanoTime() - fillStart) / 1e9;
    StreamsBuilder b = new StreamsBuilder();
    countTopology(b, input, output);
    KafkaStreams streams = new KafkaStreams(b.build(), props(bootstrap, appId, "at_least_once", stateDir));
    CountDownLatch running = new CountDownLatch(1);
    AtomicLong restored = countRestored(streams);
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.RUNNING) running.countDown();
    });
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    resetPeakRss();
    long cpuStart = os.getProcessCpuTime();
    long start = System.nanoTime();
    streams.start();
    running.await();
    double s = (System.nanoTime() - start) / 1e9;
    double cpuS = (os.getProcessCpuTime() - cpuStart) / 1e9;
    double peakMb = peakRssMbSinceReset();
    streams.close();
    System.out.printf(
        "{\"records\":%d,\"restored\":%d,\"fill_s\":%.3f,\"restore_s\":%.3f,\"restore_cpu_s\":%.3f,\"restore_peak_rss_mb\":%.0f}%n",
        records, restored.get(), fillS, s, cpuS, peakMb);
  }
}
