package io.kafkasink.avroreader;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.avro.Conversions;
import org.apache.avro.Schema;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

/**
 * Reads records in the Confluent wire format (magic byte 0, 4-byte schema
 * id, Avro binary), one per line of standard input in hexadecimal, and
 * prints each as a JSON object of its fields rendered as text, one per
 * line. The schema of each id comes from the registry (args[0], its
 * Confluent API: GET /schemas/ids/{id}). Logical types are read with
 * Avro's own conversions (BigDecimal, LocalDate, LocalTime, Instant,
 * LocalDateTime, UUID). A record that does not decode, or leaves bytes
 * over, ends the program with status 1.
 */
public final class Read {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  public static void main(String[] args) throws Exception {
    String registry = args[0];
    GenericData data = new GenericData();
    data.addLogicalTypeConversion(new Conversions.DecimalConversion());
    data.addLogicalTypeConversion(new Conversions.UUIDConversion());
    data.addLogicalTypeConversion(new TimeConversions.DateConversion());
    data.addLogicalTypeConversion(new TimeConversions.TimeMicrosConversion());
    data.addLogicalTypeConversion(new TimeConversions.TimestampMicrosConversion());
    data.addLogicalTypeConversion(new TimeConversions.LocalTimestampMicrosConversion());
    Map<Integer, Schema> schemas = new HashMap<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      byte[] b = HexFormat.of().parseHex(line.trim());
      if (b.length < 5 || b[0] != 0) {
        throw new IllegalArgumentException("not the Confluent wire format: " + line);
      }
      int id = ByteBuffer.wrap(b, 1, 4).getInt();
      Schema schema = schemas.get(id);
      if (schema == null) {
        schema = fetch(registry, id);
        schemas.put(id, schema);
      }
      BinaryDecoder dec = DecoderFactory.get().binaryDecoder(b, 5, b.length - 5, null);
      GenericRecord rec = new GenericDatumReader<GenericRecord>(schema, schema, data).read(null, dec);
      if (!dec.isEnd()) {
        throw new IllegalStateException("bytes left over after the record of schema " + id);
      }
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("_schema_id", id);
      for (Schema.Field f : schema.getFields()) {
        Object v = rec.get(f.name());
        out.put(f.name(), v instanceof GenericRecord r ? fields(r) : render(v));
      }
      System.out.println(JSON.writeValueAsString(out));
    }
  }

  private static Schema fetch(String registry, int id) throws Exception {
    HttpResponse<String> resp = HTTP.send(
        HttpRequest.newBuilder(URI.create(registry + "/schemas/ids/" + id)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    if (resp.statusCode() != 200) {
      throw new IllegalStateException("schema " + id + ": HTTP " + resp.statusCode() + ": " + resp.body());
    }
    JsonNode body = JSON.readTree(resp.body());
    return new Schema.Parser().parse(body.get("schema").asText());
  }

  /** The fields of a nested record (a row image), each rendered as text. */
  private static Map<String, String> fields(GenericRecord r) {
    Map<String, String> out = new LinkedHashMap<>();
    for (Schema.Field f : r.getSchema().getFields()) {
      out.put(f.name(), render(r.get(f.name())));
    }
    return out;
  }

  /** Renders a decoded value as Java prints it; bytes in hexadecimal, decimals plainly. */
  private static String render(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof ByteBuffer bb) {
      byte[] b = new byte[bb.remaining()];
      bb.duplicate().get(b);
      return HexFormat.of().formatHex(b);
    }
    if (v instanceof BigDecimal d) {
      return d.toPlainString();
    }
    if (v instanceof List<?> l) {
      List<String> parts = new ArrayList<>();
      for (Object o : l) {
        parts.add(render(o));
      }
      return "[" + String.join(", ", parts) + "]";
    }
    if (v instanceof GenericRecord r) {
      return fields(r).toString();
    }
    return v.toString();
  }
}
