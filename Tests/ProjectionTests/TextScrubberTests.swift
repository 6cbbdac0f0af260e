import Projection
import Testing

@Suite("Free-text scrubbing")
struct TextScrubberTests {
    /// Phone numbers, card numbers and e-mail addresses are replaced; ordinary text stays.
    @Test(arguments: [
        ("Pizza Roma", "Pizza Roma"),
        ("Pizza Roma +49 30 1234567", "Pizza Roma •••"),
        ("call (030) 123-4567 now", "call ••• now"),
        ("Card 4242 4242 4242 4242", "Card •••"),
        ("mail ana.lima+food@example.co.uk!", "mail •••"),
        ("Shop 24/7, No. 12", "Shop 24/7, No. 12"),
        ("电话１３８００１３８０００", "电话•••"),
        ("Marco\n\tRossi", "Marco Rossi"),
        ("A-1001", "A-1001"),
        ("1234567", "•••"),
    ])
    func scrubs(input: String, expected: String) {
        #expect(TextScrubber.scrub(input) == expected)
    }
}
