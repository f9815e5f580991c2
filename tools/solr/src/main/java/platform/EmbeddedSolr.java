package platform;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.apache.solr.core.CoreContainer;
import org.apache.solr.core.CoreDescriptor;
import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

/**
 * Runs a real Solr HTTP server (Solr's own Jetty runner) on 127.0.0.1:PORT with context /solr,
 * its home at HOME (solr.xml, and a core directory per core, found by core discovery).
 *
 * <p>Usage: {@code EmbeddedSolr PORT HOME [--exit-on-stdin-eof]}. PORT 0 picks a free port.
 * Prints "SOLR READY <url>" once serving with every discovered core loaded; exits 1 with the
 * reason on stderr if Jetty cannot start or a core fails to load. Stops cleanly on SIGTERM or
 * SIGINT. With --exit-on-stdin-eof it also stops when its standard input closes, so a parent
 * that dies without stopping it (SIGKILL, a crash) does not leave it running.
 *
 * <p>Jetty's runner always binds 127.0.0.1: this is the local Solr of `npm start` and `npm
 * test`; anything reachable from other hosts is a real Solr or SolrCloud (tools/solr/README.md).
 */
public final class EmbeddedSolr {
  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: EmbeddedSolr PORT HOME [--exit-on-stdin-eof]");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    Path home = Path.of(args[1]).toAbsolutePath();
    boolean watchStdin = args.length > 2 && args[2].equals("--exit-on-stdin-eof");
    Files.createDirectories(home);
    if (!Files.exists(home.resolve("solr.xml"))) Files.writeString(home.resolve("solr.xml"), "<solr/>\n");

    // withPortRetryTime(0): a port in use fails at once (the default retries binding for a minute).
    JettySolrRunner jetty = new JettySolrRunner(home.toString(), JettyConfig.builder().setPort(port).setContext("/solr").withPortRetryTime(0).stopAtShutdown(true).build());
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        if (jetty.isRunning()) jetty.stop();
      } catch (Exception e) {
        // shutting down anyway
      }
    }, "embedded-solr-shutdown"));

    try {
      jetty.start();
      waitForCores(jetty.getCoreContainer(), 120_000);
    } catch (Throwable e) {
      System.err.println("EMBEDDED SOLR FAILED: " + e);
      System.err.flush();
      // Halt: Jetty's and Solr's non-daemon threads would otherwise keep a failed start alive.
      Runtime.getRuntime().halt(1);
    }

    if (watchStdin) ParentWatch.exitWhenStdinCloses("embedded-solr-stdin-watch");

    System.out.println("SOLR READY http://127.0.0.1:" + jetty.getLocalPort() + "/solr");
    System.out.flush();
    Thread.currentThread().join();
  }

  /** Waits until every discovered core is loaded; throws naming the first core that failed. */
  private static void waitForCores(CoreContainer cc, long timeoutMs) throws Exception {
    if (cc == null) throw new IllegalStateException("Solr did not create its core container (see the log above)");
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (true) {
      Map<String, CoreContainer.CoreLoadFailure> failures = cc.getCoreInitFailures();
      if (!failures.isEmpty()) {
        Map.Entry<String, CoreContainer.CoreLoadFailure> f = failures.entrySet().iterator().next();
        Throwable cause = f.getValue().exception;
        while (cause.getCause() != null) cause = cause.getCause();
        throw new IllegalStateException("core '" + f.getKey() + "' failed to load: " + f.getValue().exception.getMessage() + " (cause: " + cause + ")");
      }
      boolean all = true;
      for (CoreDescriptor cd : cc.getCoreDescriptors()) all &= cc.isLoaded(cd.getName());
      if (all) return;
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("cores still loading after " + timeoutMs + " ms");
      Thread.sleep(50);
    }
  }
}
