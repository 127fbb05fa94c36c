// Check reads Kafka Connect JSON documents written with schemas.enable=true,
// one per line, as a Kafka Connect sink would: JsonConverter with
// schemas.enable=true turns each into Connect data, which is validated
// against its schema and written back with schemas.enable=false. For each
// line it prints "OK <the document's payload as Connect read it>" or
// "ERR <why Connect refused it>". TestDebeziumSchemasReadByJsonConverter
// runs it (java Check.java FILE, with Kafka's libs on the classpath).
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;

import org.apache.kafka.connect.data.ConnectSchema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

public class Check {
    public static void main(String[] args) throws Exception {
        JsonConverter withSchema = new JsonConverter();
        withSchema.configure(Map.of("schemas.enable", "true"), false);
        JsonConverter plain = new JsonConverter();
        plain.configure(Map.of("schemas.enable", "false"), false);
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            try {
                SchemaAndValue sv = withSchema.toConnectData("t", line.getBytes(StandardCharsets.UTF_8));
                ConnectSchema.validateValue(sv.schema(), sv.value());
                System.out.println("OK " + new String(plain.fromConnectData("t", sv.schema(), sv.value()), StandardCharsets.UTF_8));
            } catch (Exception e) {
                System.out.println("ERR " + e.toString().replace('\n', ' '));
            }
        }
    }
}
