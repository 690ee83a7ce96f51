/** Calls a method that sleeps a known time, then one that throws. */
public class Sleeper {
    static void nap(long millis) throws InterruptedException {
        Thread.sleep(millis);
    }

    static void fail() {
        throw new IllegalStateException("expected");
    }

    public static void main(String[] args) throws Exception {
        nap(Long.parseLong(args[0]));
        try {
            fail();
        } catch (IllegalStateException e) {
            System.out.println("caught " + e.getMessage());
        }
        System.exit(Integer.parseInt(args.length > 1 ? args[1] : "0"));
    }
}
