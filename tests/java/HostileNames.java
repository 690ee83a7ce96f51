/**
 * A thread whose name tries to forge a view's lines and drive the reader's
 * terminal: a newline, a forged thread header, ESC sequences, BEL, CR and
 * a right-to-left override. It calls work(), which sleeps 20 ms.
 */
public class HostileNames {
    static final String NAME = "evil\n== Thread \"main\" (forged)\r\u001b[2J\u001b[31mred\u0007\u202etxt";

    static void work() throws InterruptedException {
        Thread.sleep(20);
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(() -> {
            try {
                work();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, NAME);
        t.start();
        t.join();
    }
}
