package platform;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.solr.client.solrj.request.CollectionAdminRequest;
import org.apache.solr.cloud.MiniSolrCloudCluster;
import org.apache.solr.embedded.JettySolrRunner;

/**
 * Runs SolrCloud on 127.0.0.1: Solr's own MiniSolrCloudCluster (an embedded ZooKeeper and NODES
 * Jetty nodes) with the `content` collection created from CONFDIR in SHARDS shards, one replica
 * each, spread over the nodes. The test of SolrCloud mode (test/search/solrcloud.test.ts) runs the
 * platform against one node of it, exactly as a deployment points SOLR_URL at a SolrCloud node.
 *
 * <p>Usage: {@code EmbeddedSolrCloud NODES SHARDS BASEDIR CONFDIR [--exit-on-stdin-eof]}. Prints
 * "SOLR READY <url of the first node>" and "SOLR NODES <url>,<url>..." once the collection is
 * active; exits 1 with "EMBEDDED SOLR FAILED: <reason>" otherwise. Stops on SIGTERM/SIGINT, and
 * with the flag also when its standard input closes (its parent died).
 */
public final class EmbeddedSolrCloud {
  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: EmbeddedSolrCloud NODES SHARDS BASEDIR CONFDIR [--exit-on-stdin-eof]");
      System.exit(2);
    }
    int nodes = Integer.parseInt(args[0]);
    int shards = Integer.parseInt(args[1]);
    Path base = Path.of(args[2]).toAbsolutePath();
    Path conf = Path.of(args[3]).toAbsolutePath();
    boolean watchStdin = args.length > 4 && args[4].equals("--exit-on-stdin-eof");
    Files.createDirectories(base);

    MiniSolrCloudCluster cluster = null;
    try {
      cluster = new MiniSolrCloudCluster.Builder(nodes, base)
          .addConfig("content", conf)
          .withJettyConfig(j -> j.setContext("/solr").stopAtShutdown(true))
          .build();
      CollectionAdminRequest.createCollection("content", "content", shards, 1).process(cluster.getSolrClient());
      cluster.waitForActiveCollection("content", 120, TimeUnit.SECONDS, shards, shards);
    } catch (Throwable e) {
      System.err.println("EMBEDDED SOLR FAILED: " + e);
      System.err.flush();
      Runtime.getRuntime().halt(1);
    }
    final MiniSolrCloudCluster running = cluster;
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        running.shutdown();
      } catch (Exception e) {
        // shutting down anyway
      }
    }, "embedded-solrcloud-shutdown"));

    if (watchStdin) ParentWatch.exitWhenStdinCloses("embedded-solrcloud-stdin-watch");

    List<String> urls = new ArrayList<>();
    for (JettySolrRunner j : cluster.getJettySolrRunners()) urls.add(j.getBaseUrl().toString());
    System.out.println("SOLR NODES " + String.join(",", urls));
    System.out.println("SOLR READY " + urls.get(0));
    System.out.flush();
    Thread.currentThread().join();
  }
}
