import ConclaveTestSupport
import Testing

@testable import STOMPProtocol

@Suite("STOMP 1.2 frames")
struct STOMPFrameTests {
    @Test func encodesConnectLikeECallWithoutEscaping() {
        let frame = STOMPFrame(
            .connect,
            headers: [
                .init("accept-version", "1.2"), .init("host", "ecall"), .init("login", "device-7"),
                .init("passcode", "a:b\\c"), .init("heart-beat", "10000,10000"),
            ]
        )
        #expect(
            frame.text
                == "CONNECT\naccept-version:1.2\nhost:ecall\nlogin:device-7\npasscode:a:b\\c\nheart-beat:10000,10000\n\n\0"
        )
        #expect(!frame.description.contains("a:b"))
    }

    @Test func escapesHeadersOfOtherFrames() {
        let frame = STOMPFrame(.send, headers: [.init("destination", "/q/a:b"), .init("x\ny", "back\\slash\rcr")])
        #expect(frame.text == "SEND\ndestination:/q/a\\cb\nx\\ny:back\\\\slash\\rcr\n\n\0")
        var decoder = STOMPDecoder()
        let output = try? decoder.decode(frame.text)
        #expect(output?.frames == [frame])
    }

    @Test func addsContentLengthWhenTheBodyHoldsNul() throws {
        let frame = STOMPFrame(.send, headers: [.init("destination", "/x")], body: [65, 0, 66])
        let bytes = frame.encoded()
        #expect(String(decoding: bytes, as: UTF8.self) == "SEND\ndestination:/x\ncontent-length:3\n\nA\0B\0")
        var decoder = STOMPDecoder()
        let decoded = try decoder.decode(bytes: bytes).frames
        #expect(decoded.count == 1)
        #expect(decoded.first?.body == [65, 0, 66])
        #expect(decoded.first?["content-length"] == "3")
    }

    // The examples of the STOMP 1.2 specification's sections on frames and server frames.
    @Test func readsTheSpecificationsExamples() throws {
        var decoder = STOMPDecoder()
        let connected = try decoder.decode("CONNECTED\nversion:1.2\n\n\0").frames
        #expect(connected == [STOMPFrame(.connected, headers: [.init("version", "1.2")])])
        let message = try decoder.decode(
            "MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\0"
        ).frames
        #expect(message.first?.command == .message)
        #expect(message.first?["message-id"] == "007")
        #expect(message.first?.bodyText == "hello queue a")
        let receipt = try decoder.decode("RECEIPT\nreceipt-id:message-12345\n\n\0").frames
        #expect(receipt.first?["receipt-id"] == "message-12345")
        let errorBody =
            "The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\nHello queue a!\n-----\n"
            + "Did not contain a destination header, which is REQUIRED\nfor message propagation.\n"
        let error = try decoder.decode(
            "ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:\(errorBody.utf8.count)\n"
                + "message:malformed frame received\n\n\(errorBody)\0"
        ).frames
        #expect(error.first?.command == .error)
        #expect(error.first?["message"] == "malformed frame received")
        #expect(error.first?.bodyText == errorBody)
    }

    @Test func readsECallsUnescapedFramesAndCRLF() throws {
        var decoder = STOMPDecoder()
        let text =
            "SEND\r\ndestination:/exchange/ecall.signal.in\r\ncontent-type:application/json\r\n"
            + "authorization:Bearer a.b:c\\d\r\n\r\n{\"type\":\"call_invitation\",\"callerId\":5}\0"
        let frame = try #require(try decoder.decode(text).frames.first)
        #expect(frame["destination"] == "/exchange/ecall.signal.in")
        #expect(frame["authorization"] == "Bearer a.b:c\\d")  // no defined escape: kept as written
        #expect(frame.bodyText == "{\"type\":\"call_invitation\",\"callerId\":5}")
    }

    @Test func repeatedHeadersFirstWins() throws {
        var decoder = STOMPDecoder()
        let frame = try #require(try decoder.decode("MESSAGE\nfoo:World\nfoo:Hello\n\n\0").frames.first)
        #expect(frame["foo"] == "World")
        #expect(frame.headers.count == 2)
    }

    @Test func readsSeveralFramesHeartbeatsAndSplitFrames() throws {
        var decoder = STOMPDecoder()
        let both = try decoder.decode("\n\r\nRECEIPT\nreceipt-id:1\n\n\0\nRECEIPT\nreceipt-id:2\n\n\0\n")
        #expect(both.frames.map { $0["receipt-id"] } == ["1", "2"])
        #expect(both.heartbeats == 4)
        #expect(try decoder.decode("\n").heartbeats == 1)
        let first = try decoder.decode("MESSAGE\nsubscription:s\ncontent-length:5\n\nab")
        #expect(first.frames.isEmpty)
        #expect(decoder.pendingByteCount > 0)
        let rest = try decoder.decode("c\0d\0")
        #expect(rest.frames.first?.body == Array("abc\0d".utf8))
        #expect(rest.frames.count == 1)
        #expect(decoder.pendingByteCount == 0)
    }

    @Test(arguments: [
        ("HELLO\n\n\0", STOMPDecodeError.Code.unknownCommand),
        ("MESSAGE\nnocolon\n\n\0", .malformedHeader),
        ("MESSAGE\ncontent-length:x\n\n\0", .invalidContentLength),
        ("MESSAGE\ncontent-length:-1\n\n\0", .invalidContentLength),
        ("MESSAGE\ncontent-length:99999999999999999999999\n\n\0", .invalidContentLength),
        ("MESSAGE\ncontent-length:2\n\nabc\0", .missingTerminator),
        ("MESSAGE\ncontent-length:9223372036854775807\n\n\0", .frameTooLarge),
    ])
    func rejectsMalformedFrames(text: String, code: STOMPDecodeError.Code) {
        var decoder = STOMPDecoder()
        #expect(throws: STOMPDecodeError.self) { try decoder.decode(text) }
        do {
            _ = try decoder.decode(text)
        } catch {
            #expect(error.code == code)
            #expect(!error.message.isEmpty)
        }
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func enforcesLimits() {
        let limits = STOMPDecoder.Limits(maximumFrameSize: 100, maximumHeaderCount: 2, maximumLineLength: 20)
        func code(_ text: String) -> STOMPDecodeError.Code? {
            var decoder = STOMPDecoder(limits: limits)
            do {
                _ = try decoder.decode(text)
                return nil
            } catch { return error.code }
        }
        #expect(code("MESSAGE\na:1\nb:2\nc:3\n\n\0") == .tooManyHeaders)
        #expect(code("MESSAGE\na:\(String(repeating: "x", count: 30))\n\n\0") == .lineTooLong)
        #expect(code("MESSAGE\na:\(String(repeating: "x", count: 30))") == .lineTooLong)  // before its EOL arrives
        #expect(code("MESSAGE\n\n\(String(repeating: "x", count: 200))\0") == .frameTooLarge)
        #expect(code("MESSAGE\n\n\(String(repeating: "x", count: 200))") == .frameTooLarge)  // before its NUL arrives
        #expect(code("MESSAGE\na:1\n\nbody\0") == nil)
    }

    @Test func decoderStartsAfreshAfterAnError() throws {
        var decoder = STOMPDecoder()
        #expect(throws: STOMPDecodeError.self) { try decoder.decode("BOGUS\n\n\0") }
        #expect(try decoder.decode("RECEIPT\nreceipt-id:9\n\n\0").frames.count == 1)
    }
}

/// Bounded, seeded fuzzing: random and mutated frames give frames or a typed error, never a trap.
@Suite("Fuzzing the STOMP decoder")
struct STOMPFuzzTests {
    @Test func decoderSurvivesRandomAndMutatedFrames() {
        var random = SeededGenerator(seed: 0x570_3D)
        let seeds: [[UInt8]] = [
            STOMPFrame(.message, headers: [.init("subscription", "sub-1"), .init("a:b", "c\nd")], text: "{\"k\":1}")
                .encoded(),
            STOMPFrame(.error, headers: [.init("message", "x")], body: [1, 0, 2]).encoded(),
            Array("CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0\n\n".utf8),
        ]
        let limits = STOMPDecoder.Limits(maximumFrameSize: 512, maximumHeaderCount: 8, maximumLineLength: 64)
        var decoded = 0
        var failed = 0
        for i in 0..<6000 {
            var decoder = STOMPDecoder(limits: limits)
            let input =
                i % 4 == 0
                ? random.bytes(Int.random(in: 0...96, using: &random)) : random.mutate(seeds[i % seeds.count])
            // Fed whole, and split at a random point, as a frame split across messages would be.
            let cut = Int.random(in: 0...input.count, using: &random)
            for part in [Array(input[..<cut]), Array(input[cut...])] {
                do {
                    let output = try decoder.decode(bytes: part)
                    decoded += output.frames.count
                    for frame in output.frames { _ = frame.encoded() }
                } catch {
                    failed += 1
                    #expect(!error.message.isEmpty)
                }
                #expect(decoder.pendingByteCount <= input.count)
            }
        }
        #expect(decoded > 500)
        #expect(failed > 500)
    }
}
