/** Two methods of one name (overloads) that sleep different times, and one that is not overloaded. */
public class Overloads {
    static void nap(int millis) throws InterruptedException {
        Thread.sleep(millis);
    }

    static void nap(String millis) throws InterruptedException {
        Thread.sleep(2L * Integer.parseInt(millis));
    }

    static void once() throws InterruptedException {
        nap(5);
    }

    public static void main(String[] args) throws Exception {
        once();
        nap("20");
    }
}
