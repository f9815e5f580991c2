package platform;

import java.io.InputStream;

/** Stops the JVM when its standard input closes: the parent that started it is gone. */
final class ParentWatch {
  private ParentWatch() {}

  /** Starts a daemon thread that reads stdin (the parent writes nothing) and exits on EOF. */
  static void exitWhenStdinCloses(String threadName) {
    Thread t = new Thread(() -> {
      try (InputStream in = System.in) {
        byte[] buf = new byte[256];
        while (in.read(buf) >= 0) {
          // the parent writes nothing; EOF means it is gone
        }
      } catch (Exception e) {
        // treat a broken stdin like EOF
      }
      System.exit(0);
    }, threadName);
    t.setDaemon(true);
    t.start();
  }
}
