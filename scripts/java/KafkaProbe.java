// KafkaProbe: answers questions about a Kafka cluster with Apache Kafka's own Java client,
// so tests compare sluice against the reference implementation, not a typed-in table.
//
//   ready BOOTSTRAP TIMEOUT_MS [N]    exit 0 once the cluster answers a metadata request
//                                     (naming at least N brokers, default 1)
//   leader BOOTSTRAP TOPIC PARTITION  print the node id leading the partition
//   controller BOOTSTRAP              print the node id of the active KRaft controller
//   partition COUNT KEY...            print "KEY<TAB>PARTITION" as the Java producer places
//                                     a keyed record (murmur2 of the UTF-8 key bytes)
//   delete-prefix BOOTSTRAP PREFIX    delete every topic whose name starts with PREFIX (not
//                                     empty) and print how many (a benchmark run's topics)
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class KafkaProbe {
  static Properties clientProps(String bootstrap) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
    return p;
  }

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "ready": {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        int timeout = Integer.parseInt(args[2]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeout);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeout);
        int wanted = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        try (Admin admin = Admin.create(p)) {
          int nodes = admin.describeCluster().nodes().get(timeout, TimeUnit.MILLISECONDS).size();
          System.out.println(nodes);
          System.exit(nodes >= wanted ? 0 : 1);
        } catch (Exception e) {
          System.exit(1);
        }
      }
      case "leader": {
        try (Admin admin = Admin.create(clientProps(args[1]))) {
          var topic = admin.describeTopics(List.of(args[2])).allTopicNames().get(30, TimeUnit.SECONDS).get(args[2]);
          var info = topic.partitions().get(Integer.parseInt(args[3]));
          System.out.println(info.leader() == null ? -1 : info.leader().id());
          System.exit(0);
        }
      }
      case "controller": {
        try (Admin admin = Admin.create(clientProps(args[1]))) {
          System.out.println(admin.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS).leaderId());
          System.exit(0);
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
      case "delete-prefix": {
        if (args[2].isEmpty()) {  // would delete every topic of the cluster
          System.err.println("delete-prefix needs a non-empty prefix");
          System.exit(2);
        }
        try (Admin admin = Admin.create(clientProps(args[1]))) {
          var doomed = admin.listTopics().names().get(30, TimeUnit.SECONDS).stream()
                           .filter(name -> name.startsWith(args[2]))
                           .toList();
          if (!doomed.isEmpty()) admin.deleteTopics(doomed).all().get(120, TimeUnit.SECONDS);
          System.out.println(doomed.size());
          System.exit(0);
        }
      }
      default:
        System.err.println("unknown command " + args[0]);
        System.exit(2);
    }
  }
}
