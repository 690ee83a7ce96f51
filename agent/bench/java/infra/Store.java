package infra;

import java.util.Iterator;
import java.util.LinkedHashMap;

/** A shared LRU cache behind one lock. */
public final class Store {
    private final LinkedHashMap<String, String> map;
    private final int capacity;

    public Store(int capacity) {
        this.capacity = capacity;
        map = new LinkedHashMap<>(capacity * 2, 0.75f, true);
    }

    public synchronized String get(String key) {
        return map.get(key);
    }

    public synchronized void put(String key, String value) {
        map.put(key, value);
        if (map.size() > capacity) {
            Iterator<String> eldest = map.keySet().iterator();
            eldest.next();
            eldest.remove();
        }
    }

    public synchronized int size() {
        return map.size();
    }
}
