/**
 * A thread whose name is HTML that would run script if a page inserted it
 * as markup (tests/flame_browser.rs: the flame graph shows it as text). It
 * sleeps 30 ms in htmlNamedWork().
 */
public class HtmlNames {
    static final String NAME = "<img src=x onerror=\"document.title='pwned'\">&amp;<b>t</b>";

    static void htmlNamedWork() throws InterruptedException {
        Thread.sleep(30);
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(() -> {
            try {
                htmlNamedWork();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, NAME);
        t.start();
        t.join();
    }
}
