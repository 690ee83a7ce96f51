/** Sleeps 200 ms and exits: the smallest JVM run, to time what jtrace adds around one. */
public class Nop {
    public static void main(String[] args) throws InterruptedException {
        Thread.sleep(200);
    }
}
