import DeliveryActivityContract
import OrderDomain
import Projection
import Testing

@Suite("One status, two types")
struct StatusMappingTests {
    /// Every domain status maps to the contract's status of the same name and back: the app and the
    /// server speak of the same six.
    @Test(arguments: OrderStatus.allCases)
    func mapsBothWays(status: OrderStatus) {
        let shown = DeliveryStatus(status)
        #expect(shown.rawValue == status.rawValue)
        #expect(OrderStatus(shown) == status)
    }

    /// The contract has no status the domain lacks.
    @Test func theContractHasNoOtherStatus() {
        #expect(Set(DeliveryStatus.allCases.map(\.rawValue)) == Set(OrderStatus.allCases.map(\.rawValue)))
    }
}
