import Foundation
import RecorderJobs
import Testing

func sampleEvents() -> [RecorderEvent] {
    let time = "2026-11-24T07:00:02.000Z"
    return [
        .recordingStarted(
            RecordingStarted(jobID: "j1", callID: 7, serviceID: "svc-a", path: "calls/7", attempt: 1, time: time)
        ),
        .recordingFinished(
            RecordingFinished(
                jobID: "j1",
                callID: 7,
                serviceID: "svc-b",
                path: "calls/7",
                summary: RecordingSummary(
                    participants: 3,
                    duration: 61.5,
                    framesWritten: 12_345,
                    problems: ["participant 2: 3 frames undecryptable"],
                    gaps: [RecordingGap(start: 20, seconds: 2.5)]
                ),
                time: time
            )
        ),
        .recordingFailed(
            RecordingFailed(jobID: nil, callID: nil, serviceID: "svc-a", reason: "job: not valid JSON", time: time)
        ),
        .serviceStatus(
            ServiceStatus(
                serviceID: "svc-a",
                host: "rec-1",
                calls: [ServiceCall(jobID: "j1", callID: 7, participants: 3, seconds: 12)],
                cpu: 0.75,
                cpuBudget: 1.5,
                diskFreeBytes: 1 << 40,
                draining: false,
                problems: [],
                time: time
            )
        ),
    ]
}

@Suite("Recorder events")
struct RecorderEventTests {
    @Test func roundTripThroughTheirJSON() throws {
        for event in sampleEvents() {
            #expect(try RecorderEvent.decode(event.encoded()) == event)
        }
    }

    @Test func carryTheirTypeAndRoutingKey() throws {
        let events = sampleEvents()
        #expect(
            events.map(\.type) == ["recording_started", "recording_finished", "recording_failed", "service_status"]
        )
        #expect(
            events.map(RecorderTopology.eventDestination) == [
                "/exchange/recorder.events/recording.started", "/exchange/recorder.events/recording.finished",
                "/exchange/recorder.events/recording.failed", "/exchange/recorder.events/service.status",
            ]
        )
        let object = try #require(
            JSONSerialization.jsonObject(with: Data(events[0].encoded())) as? [String: Any]
        )
        #expect(object["type"] as? String == "recording_started")
        #expect(object["jobId"] as? String == "j1")
        #expect(object["serviceId"] as? String == "svc-a")
        #expect(RecorderTopology.allEvents == "/exchange/recorder.events/#")
        #expect(RecorderTopology.jobQueue == "/amq/queue/recorder.jobs")
    }

    @Test func encodesTheDocumentedFailureVector() {
        let failed = RecorderEvent.recordingFailed(
            RecordingFailed(jobID: "j2", callID: 9, serviceID: "s", reason: "output: \"/x\" is absolute", time: "t")
        )
        #expect(
            String(decoding: failed.encoded(), as: UTF8.self)
                == #"{"callId":9,"jobId":"j2","reason":"output: \"/x\" is absolute","serviceId":"s","time":"t","type":"recording_failed"}"#
        )
    }

    @Test func refusesUnknownTypesAndBadServiceIds() {
        func reason(_ text: String) -> String? {
            do {
                _ = try RecorderEvent.decode(Array(text.utf8))
                return nil
            } catch {
                return error.reason
            }
        }
        #expect(reason(#"{"type":"recording_paused"}"#) == "type: \"recording_paused\" is not a recorder event")
        #expect(reason(#"{"jobId":"x"}"#) == "type: missing")
        #expect(
            reason(#"{"type":"recording_failed","serviceId":"a b","reason":"r","time":"t"}"#)?
                .hasPrefix("serviceId: \"a b\" has a character outside") == true
        )
        #expect(reason(#"{"type":"recording_failed","serviceId":"s","time":"t"}"#) == "reason: missing")
    }
}
