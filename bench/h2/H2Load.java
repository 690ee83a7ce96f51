import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.concurrent.CountDownLatch;

/**
 * The H2 workload: an embedded H2 database (Debian's libh2-java),
 * THREADS JDBC threads, each running ROUNDS rounds of an insert, a commit,
 * an update of one shared row and a range query. Prints the elapsed time of
 * the rounds (the JVM's start-up and H2's set-up excluded) in ms.
 * Usage: H2Load DIR [THREADS] [ROUNDS]
 */
public class H2Load {
    public static void main(String[] args) throws Exception {
        String url = args[0].equals("mem") ? "jdbc:h2:mem:h2load;DB_CLOSE_DELAY=-1" : "jdbc:h2:" + args[0] + "/db";
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 8;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 500;
        try (Connection c = DriverManager.getConnection(url, "sa", "");
             Statement s = c.createStatement()) {
            s.execute("DROP TABLE IF EXISTS item");
            s.execute("DROP TABLE IF EXISTS counter");
            s.execute("CREATE TABLE item(id BIGINT AUTO_INCREMENT PRIMARY KEY, owner INT, v VARCHAR(64))");
            s.execute("CREATE INDEX item_owner ON item(owner, id)");
            s.execute("CREATE TABLE counter(id INT PRIMARY KEY, n BIGINT)");
            s.execute("INSERT INTO counter VALUES (1, 0)");
        }
        CountDownLatch start = new CountDownLatch(1);
        Thread[] workers = new Thread[threads];
        long[] seen = new long[threads];
        for (int t = 0; t < threads; t++) {
            final int me = t;
            workers[t] = new Thread(() -> {
                try (Connection c = DriverManager.getConnection(url, "sa", "")) {
                    c.setAutoCommit(false);
                    PreparedStatement ins = c.prepareStatement("INSERT INTO item(owner, v) VALUES (?, ?)");
                    PreparedStatement upd = c.prepareStatement("UPDATE counter SET n = n + 1 WHERE id = 1");
                    PreparedStatement range = c.prepareStatement(
                            "SELECT COUNT(*), MAX(id) FROM item WHERE owner = ? AND id > ?");
                    start.await();
                    for (int r = 0; r < rounds; r++) {
                        ins.setInt(1, me);
                        ins.setString(2, "value " + me + " " + r);
                        ins.executeUpdate();
                        c.commit();
                        upd.executeUpdate();
                        c.commit();
                        range.setInt(1, me);
                        range.setLong(2, r);
                        try (ResultSet rs = range.executeQuery()) {
                            rs.next();
                            seen[me] += rs.getLong(1);
                        }
                        c.commit();
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "jdbc-" + t);
            workers[t].start();
        }
        long t0 = System.nanoTime();
        start.countDown();
        for (Thread w : workers) {
            w.join();
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        try (Connection c = DriverManager.getConnection(url, "sa", "");
             Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT n FROM counter WHERE id = 1")) {
            rs.next();
            System.out.println("rounds_ms " + ms + " counter " + rs.getLong(1));
        }
    }
}
