package serverlab.core;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.util.ByteArrayBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;

/** Writes the seed 004 response shape (spec §6) with Jackson's streaming generator. */
final class Deliveries {
    private Deliveries() {
    }

    static byte[] event(PushRequest request, String name, long seq, long created, long sent,
            int total, int place, int finish) {
        ByteArrayBuilder out = new ByteArrayBuilder(384 + request.spec().requestJson().length());
        try (JsonGenerator g = Json.FACTORY.createGenerator(out)) {
            g.writeStartObject();
            g.writeObjectFieldStart("response");
            g.writeObjectFieldStart("event");
            g.writeStringField("name", name);
            g.writeNumberField("seq", seq);
            writeTimings(g, created, sent);
            g.writeObjectFieldStart("connections");
            g.writeNumberField("total", total);
            g.writeNumberField("place", place);
            g.writeEndObject();
            g.writeEndObject();
            g.writeEndObject();
            writeRequestPart(g, request, sent, finish);
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return terminate(out, request);
    }

    static byte[] timeout(PushRequest request, long sent, int finish) {
        ByteArrayBuilder out = new ByteArrayBuilder(256 + request.spec().requestJson().length());
        try (JsonGenerator g = Json.FACTORY.createGenerator(out)) {
            g.writeStartObject();
            g.writeObjectFieldStart("response");
            g.writeBooleanField("timeout", true);
            g.writeEndObject();
            writeRequestPart(g, request, sent, finish);
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return terminate(out, request);
    }

    private static void writeRequestPart(JsonGenerator g, PushRequest request, long sent, int finish)
            throws IOException {
        g.writeFieldName("request");
        g.writeRawValue(request.spec().requestJson());
        writeTimings(g, request.created(), sent);
        g.writeObjectFieldStart("connections");
        g.writeNumberField("start", request.startCount());
        g.writeNumberField("finish", finish);
        g.writeEndObject();
    }

    private static void writeTimings(JsonGenerator g, long created, long sent) throws IOException {
        g.writeObjectFieldStart("timings");
        g.writeNumberField("duration", sent - created);
        g.writeNumberField("sent", sent);
        g.writeNumberField("created", created);
        g.writeEndObject();
    }

    /** Comet lines end in a newline (NDJSON); a long-poll answer is the bare object. */
    private static byte[] terminate(ByteArrayBuilder out, PushRequest request) {
        if (!request.longPoll()) {
            out.append('\n');
        }
        return out.toByteArray();
    }
}
