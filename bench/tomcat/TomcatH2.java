import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.apache.catalina.Context;
import org.apache.catalina.startup.Tomcat;

/**
 * The issue-20 workload: embedded Tomcat 10 with a servlet backed by an
 * in-memory H2 database (bench/tomcat_export.sh drives it with wrk).
 * Each request looks a row up, updates a shared counter row and answers.
 * Usage: java -cp tomcat10-embed-core.jar:h2.jar:. TomcatH2 <port> <seconds>
 */
public class TomcatH2 {
    static final String URL = "jdbc:h2:mem:bench;DB_CLOSE_DELAY=-1";

    public static class Lookup extends HttpServlet {
        private final ThreadLocal<Connection> conn = ThreadLocal.withInitial(() -> {
            try {
                return DriverManager.getConnection(URL);
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        });

        @Override
        protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            int id = (int) (Thread.currentThread().hashCode() * 31L + System.nanoTime()) & 1023;
            String name;
            try {
                Connection c = conn.get();
                try (PreparedStatement q = c.prepareStatement("SELECT name FROM item WHERE id = ?")) {
                    q.setInt(1, id);
                    try (ResultSet r = q.executeQuery()) {
                        name = r.next() ? r.getString(1) : "none";
                    }
                }
                try (PreparedStatement u = c.prepareStatement("UPDATE hits SET n = n + 1 WHERE id = 0")) {
                    u.executeUpdate();
                }
            } catch (SQLException e) {
                throw new IOException(e);
            }
            resp.setContentType("text/plain");
            resp.getWriter().write(name + "\n");
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        long seconds = Long.parseLong(args[1]);
        try (Connection c = DriverManager.getConnection(URL); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE item(id INT PRIMARY KEY, name VARCHAR(64))");
            s.execute("CREATE TABLE hits(id INT PRIMARY KEY, n BIGINT)");
            s.execute("INSERT INTO hits VALUES (0, 0)");
            try (PreparedStatement p = c.prepareStatement("INSERT INTO item VALUES (?, ?)")) {
                for (int i = 0; i < 1024; i++) {
                    p.setInt(1, i);
                    p.setString(2, "item-" + i);
                    p.executeUpdate();
                }
            }
        }
        Tomcat tomcat = new Tomcat();
        tomcat.setBaseDir(System.getProperty("java.io.tmpdir") + "/tomcat-h2-" + port);
        tomcat.setPort(port);
        tomcat.getConnector();
        Context ctx = tomcat.addContext("", null);
        Tomcat.addServlet(ctx, "lookup", new Lookup()).addMapping("/lookup");
        tomcat.start();
        System.out.println("READY " + port);
        System.out.flush();
        Thread.sleep(seconds * 1000);
        tomcat.stop();
        tomcat.destroy();
        try (Connection c = DriverManager.getConnection(URL); Statement s = c.createStatement();
             ResultSet r = s.executeQuery("SELECT n FROM hits WHERE id = 0")) {
            r.next();
            System.out.println("REQUESTS " + r.getLong(1));
        }
    }
}
