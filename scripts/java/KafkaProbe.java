// KafkaProbe: answers questions about a Kafka cluster with Apache Kafka's own Java client,
// so tests compare sluice against the reference implementation, not a typed-in table.
//
//   ready BOOTSTRAP TIMEOUT_MS        exit 0 once the cluster answers a metadata request
//   partition COUNT KEY...            print "KEY<TAB>PARTITION" as the Java producer places
//                                     a keyed record (murmur2 of the UTF-8 key bytes)
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class KafkaProbe {
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "ready": {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        int timeout = Integer.parseInt(args[2]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeout);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeout);
        try (Admin admin = Admin.create(p)) {
          int nodes = admin.describeCluster().nodes().get(timeout, TimeUnit.MILLISECONDS).size();
          System.out.println(nodes);
          System.exit(nodes > 0 ? 0 : 1);
        } catch (Exception e) {
          System.exit(1);
        }
      }
      case "partition": {
        int count = Integer.parseInt(args[1]);
        for (int i = 2; i < args.length; ++i) {
          byte[] key = args[i].getBytes(StandardCharsets.UTF_8);
          System.out.println(args[i] + "\t" + BuiltInPartitioner.partitionForKey(key, count));
        }
        return;
      }
      default:
        System.err.println("unknown command " + args[0]);
        System.exit(2);
    }
  }
}
