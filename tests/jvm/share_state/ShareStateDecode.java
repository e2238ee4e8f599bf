import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotKey;
import org.apache.kafka.coordinator.share.generated.ShareSnapshotValue;
import org.apache.kafka.coordinator.share.generated.ShareUpdateKey;
import org.apache.kafka.coordinator.share.generated.ShareUpdateValue;

/**
 * Decodes records of __share_group_state with Kafka's own generated classes (kafka-share-coordinator): one
 * "keyhex valuehex" line per record on stdin ("-" for a null value), one line per record on stdout with
 * the record type and what Kafka's classes read (their toString), or the exception. Run as a single-file
 * source program on the "kafka" module's classpath (tests/jvm/test_jvm_share.py).
 */
public final class ShareStateDecode {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        HexFormat hex = HexFormat.of();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] kv = line.trim().split(" ");
            try {
                ByteBuffer k = ByteBuffer.wrap(hex.parseHex(kv[0]));
                short type = k.getShort();
                String key = type == 0 ? new ShareSnapshotKey(new ByteBufferAccessor(k), (short) 0).toString()
                                       : new ShareUpdateKey(new ByteBufferAccessor(k), (short) 0).toString();
                if (k.hasRemaining()) {
                    throw new IllegalStateException(k.remaining() + " key bytes left");
                }
                String value = "null";
                if (!kv[1].equals("-")) {
                    ByteBuffer v = ByteBuffer.wrap(hex.parseHex(kv[1]));
                    short version = v.getShort();
                    value = type == 0 ? new ShareSnapshotValue(new ByteBufferAccessor(v), version).toString()
                                      : new ShareUpdateValue(new ByteBufferAccessor(v), version).toString();
                    if (v.hasRemaining()) {
                        throw new IllegalStateException(v.remaining() + " value bytes left");
                    }
                }
                System.out.println(type + " " + key + " " + value);
            } catch (Exception e) {
                System.out.println("ERROR " + e);
            }
        }
    }
}
