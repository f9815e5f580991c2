package platform;

import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

/**
 * Runs a real Solr HTTP server (Solr's own Jetty runner) on 127.0.0.1:PORT with context /solr,
 * its home at HOME (solr.xml, and a core directory per core, found by core discovery).
 * Prints "SOLR READY <url>" once serving; stops cleanly on SIGTERM.
 */
public final class EmbeddedSolr {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    Path home = Path.of(args[1]).toAbsolutePath();
    if (!Files.exists(home.resolve("solr.xml"))) Files.writeString(home.resolve("solr.xml"), "<solr/>\n");
    JettySolrRunner jetty = new JettySolrRunner(home.toString(), JettyConfig.builder().setPort(port).setContext("/solr").stopAtShutdown(true).build());
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        jetty.stop();
      } catch (Exception e) {
        // shutting down anyway
      }
    }));
    jetty.start();
    System.out.println("SOLR READY http://127.0.0.1:" + jetty.getLocalPort() + "/solr");
    System.out.flush();
    Thread.currentThread().join();
  }
}
