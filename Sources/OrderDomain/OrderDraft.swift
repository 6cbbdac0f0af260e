import DeliveryActivityContract
public import FoundationEssentials

/// A new order as a merchant sends it, before validation: every field may be missing or malformed.
public struct OrderDraft: Sendable, Hashable {
    public struct Item: Sendable, Hashable {
        public var name: String?
        public var quantity: Int?
        public var price: Double?

        public init(name: String?, quantity: Int?, price: Double?) {
            self.name = name
            self.quantity = quantity
            self.price = price
        }
    }

    public struct CustomerDraft: Sendable, Hashable {
        public var id: String?
        public var name: String?
        public var phone: String?
        public var locale: String?

        public init(id: String?, name: String?, phone: String?, locale: String?) {
            self.id = id
            self.name = name
            self.phone = phone
            self.locale = locale
        }
    }

    public struct PaymentDraft: Sendable, Hashable {
        public var method: String?
        public var brand: String?
        public var last4: String?

        public init(method: String?, brand: String?, last4: String?) {
            self.method = method
            self.brand = brand
            self.last4 = last4
        }
    }

    /// The destination's coordinates, in degrees.
    public struct CoordinateDraft: Sendable, Hashable {
        public var latitude: Double?
        public var longitude: Double?

        public init(latitude: Double?, longitude: Double?) {
            self.latitude = latitude
            self.longitude = longitude
        }
    }

    public var number: String?
    public var merchantName: String?
    public var items: [Item]?
    public var customer: CustomerDraft?
    public var address: String?
    public var payment: PaymentDraft?
    public var estimatedArrival: Date?
    public var note: String?
    /// Optional: with it, the rider's positions show a remaining distance and a live ETA.
    public var destination: CoordinateDraft?

    public init(
        number: String?,
        merchantName: String?,
        items: [Item]?,
        customer: CustomerDraft?,
        address: String?,
        payment: PaymentDraft?,
        estimatedArrival: Date?,
        note: String?,
        destination: CoordinateDraft? = nil
    ) {
        self.number = number
        self.merchantName = merchantName
        self.items = items
        self.customer = customer
        self.address = address
        self.payment = payment
        self.estimatedArrival = estimatedArrival
        self.note = note
        self.destination = destination
    }

    /// Checks every field and builds the placed order with its `created` event.
    ///
    /// - Parameters:
    ///   - id: The new order's id, chosen by the caller so that this stays pure.
    ///   - merchantID: The merchant the order belongs to (from the caller's key, or given by an admin).
    ///   - principal: Who creates it, for the history.
    ///   - now: The creation time.
    /// - Throws: `validation_failed` listing every missing or malformed field.
    public func validated(id: String, merchantID: String, by principal: Principal, at now: Date) throws(OrderError)
        -> (order: Order, event: OrderEvent)
    {
        var check = FieldChecker()
        let number = check.text(number, "number", length: OrderLimits.numberLength)
        if let number, !number.allSatisfy({ $0.isASCIIAlphanumeric || "-_#./".contains($0) }) {
            check.fail("number", "may contain only letters, digits and - _ # . /")
        }
        let merchantName = check.text(merchantName, "merchantName", length: OrderLimits.nameLength)
        let items = validatedItems(&check)
        let customer = validatedCustomer(&check)
        let address = check.text(address, "address", length: OrderLimits.addressLength)
        let payment = validatedPayment(&check)
        let eta = check.estimatedArrival(estimatedArrival, "estimatedArrival", createdAt: now, now: now)
        let note = check.optionalText(note, "note", length: OrderLimits.noteLength)
        let destination = validatedDestination(&check)
        try check.finish()

        guard let number, let merchantName, let items, let customer, let address, let payment, let eta else {
            preconditionFailure("a field passed validation without a value")
        }
        let order = Order(
            id: id, merchantID: merchantID, number: number, merchantName: merchantName, items: items,
            customer: customer, address: address, payment: payment, note: note.flatMap { $0.isEmpty ? nil : $0 },
            status: .placed, cancelledAt: nil, estimatedArrival: eta, rider: nil, createdAt: now, updatedAt: now,
            destination: destination
        )
        let event = OrderEvent(
            orderID: id, kind: .created, from: .placed, to: .placed, actor: principal.auditLabel, at: now, reason: nil
        )
        return (order, event)
    }

    private func validatedItems(_ check: inout FieldChecker) -> [LineItem]? {
        guard let items else {
            check.fail("items", "is required")
            return nil
        }
        guard OrderLimits.itemCount.contains(items.count) else {
            check.fail("items", "must hold 1 to \(OrderLimits.itemCount.upperBound) items")
            return nil
        }
        var result: [LineItem] = []
        for (index, item) in items.enumerated() {
            let path = "items[\(index)]"
            let name = check.text(item.name, "\(path).name", length: OrderLimits.nameLength)
            var quantity = item.quantity
            if let value = quantity, !OrderLimits.quantity.contains(value) {
                check.fail("\(path).quantity", "must be 1 to \(OrderLimits.quantity.upperBound)")
                quantity = nil
            } else if quantity == nil {
                check.fail("\(path).quantity", "is required")
            }
            var price = item.price
            if let value = price, !(value.isFinite && value >= 0 && value < 1_000_000) {
                check.fail("\(path).price", "must be a number from 0 to 999999")
                price = nil
            } else if price == nil {
                check.fail("\(path).price", "is required")
            }
            if let name, let quantity, let price {
                result.append(LineItem(name: name, quantity: quantity, price: price))
            }
        }
        return result.count == items.count ? result : nil
    }

    private func validatedCustomer(_ check: inout FieldChecker) -> Customer? {
        guard let customer else {
            check.fail("customer", "is required")
            return nil
        }
        let id = check.identifier(customer.id, "customer.id")
        let name = check.text(customer.name, "customer.name", length: OrderLimits.nameLength)
        let phone = check.phone(customer.phone, "customer.phone", required: true)
        let locale = check.locale(customer.locale, "customer.locale")
        guard let id, let name, let phone, let locale else { return nil }
        return Customer(id: id, name: name, phone: phone, locale: locale)
    }

    private func validatedDestination(_ check: inout FieldChecker) -> Coordinate? {
        guard let destination else { return nil }
        return check.coordinate(
            latitude: destination.latitude, longitude: destination.longitude, prefix: "destination.")
    }

    private func validatedPayment(_ check: inout FieldChecker) -> Payment? {
        guard let payment else {
            check.fail("payment", "is required")
            return nil
        }
        var ok = true
        if let method = payment.method {
            if !OrderLimits.paymentMethods.contains(method) {
                check.fail(
                    "payment.method", "must be one of \(OrderLimits.paymentMethods.sorted().joined(separator: ", "))")
                ok = false
            }
        } else {
            check.fail("payment.method", "is required")
            ok = false
        }
        let brand = check.optionalText(payment.brand, "payment.brand", length: 1...32)
        if payment.brand != nil && brand == nil { ok = false }
        if let last4 = payment.last4, !(last4.count == 4 && last4.allSatisfy(\.isASCIIDigit)) {
            check.fail("payment.last4", "must be exactly 4 digits")
            ok = false
        }
        guard ok, let method = payment.method else { return nil }
        return Payment(method: method, brand: brand, last4: payment.last4)
    }
}
