-- 015_money.sql: money as shops hold it: currencies, payments in parts, payments taken by staff.
--
-- Amounts keep their columns and parameters named amount_cents (every caller uses the names);
-- from now on they are minor units of the order's currency (JPY yen, EUR cents, KWD fils).
--   currencies          the active ISO 4217 alpha-3 codes with their minor-unit exponents
--   settings            default_currency (USD): the currency of an order placed without one;
--                       auto_refund_limit_cents keeps its meaning for it, another currency's limit
--                       is the key auto_refund_limit.<CODE> (none: every refund is reviewed)
--   orders              currency (existing orders: the default currency), allow_partial (the
--                       order may be paid in parts), captured_cents (the parts captured so far)
--   payments            currency, and operator/reason of a payment taken by staff; outcomes
--                       partial, overpaid, currency_mismatch; one paid or overpaid per order
--   exceptions          currency of the amount; kinds currency_mismatch, overpaid, cancelled_part
--   status_log          source manual_payment (a payment taken by staff paid the order)
--   archived_*          the same columns (archive() copies them)
-- A row inserted without a currency (by hand, fixtures) gets default_currency from the trigger
-- currency_default (functions/triggers/currency_default.sql); the gate always names one.
--
-- claim_payment, place_order and exception_list change their signatures: the old ones are
-- dropped here and the function files create the new ones in the same run.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

DROP FUNCTION IF EXISTS ordergate.place_order(text, bigint, jsonb, text, timestamptz, jsonb);
DROP FUNCTION IF EXISTS ordergate.claim_payment(text, text, bigint, text);
DROP FUNCTION IF EXISTS ordergate.exception_list(text, int);

CREATE TABLE ordergate.currencies (
    code     text COLLATE "C" PRIMARY KEY CHECK (code ~ '^[A-Z]{3}$'),
    exponent smallint NOT NULL CHECK (exponent BETWEEN 0 AND 4),
    name     text NOT NULL CHECK (length(name) BETWEEN 1 AND 128)
);
GRANT SELECT ON ordergate.currencies TO ordergate_order_service, ordergate_service;
COMMENT ON TABLE ordergate.currencies IS
    'The currencies an order may be placed in: ISO 4217 alpha-3 codes with their minor-unit exponents';
COMMENT ON COLUMN ordergate.currencies.code IS
    'The ISO 4217 alpha-3 code, upper case (EUR, JPY, KWD)';
COMMENT ON COLUMN ordergate.currencies.exponent IS
    'Digits of the minor unit: an amount_cents of 1 is 10^-exponent of the currency (JPY 0, EUR 2, KWD 3)';
COMMENT ON COLUMN ordergate.currencies.name IS
    'The currency''s name as ISO 4217 gives it';

-- The currencies with a minor unit in the ISO 4217 list (funds codes included; the codes
-- without one, such as gold XAU or the test code XTS, are left out). A shop adds one that
-- comes later with an INSERT as the owner.
INSERT INTO ordergate.currencies (code, exponent, name) VALUES
    ('AED', 2, 'UAE Dirham'),
    ('AFN', 2, 'Afghani'),
    ('ALL', 2, 'Lek'),
    ('AMD', 2, 'Armenian Dram'),
    ('AOA', 2, 'Kwanza'),
    ('ARS', 2, 'Argentine Peso'),
    ('AUD', 2, 'Australian Dollar'),
    ('AWG', 2, 'Aruban Florin'),
    ('AZN', 2, 'Azerbaijan Manat'),
    ('BAM', 2, 'Convertible Mark'),
    ('BBD', 2, 'Barbados Dollar'),
    ('BDT', 2, 'Taka'),
    ('BGN', 2, 'Bulgarian Lev'),
    ('BHD', 3, 'Bahraini Dinar'),
    ('BIF', 0, 'Burundi Franc'),
    ('BMD', 2, 'Bermudian Dollar'),
    ('BND', 2, 'Brunei Dollar'),
    ('BOB', 2, 'Boliviano'),
    ('BOV', 2, 'Mvdol'),
    ('BRL', 2, 'Brazilian Real'),
    ('BSD', 2, 'Bahamian Dollar'),
    ('BTN', 2, 'Ngultrum'),
    ('BWP', 2, 'Pula'),
    ('BYN', 2, 'Belarusian Ruble'),
    ('BZD', 2, 'Belize Dollar'),
    ('CAD', 2, 'Canadian Dollar'),
    ('CDF', 2, 'Congolese Franc'),
    ('CHE', 2, 'WIR Euro'),
    ('CHF', 2, 'Swiss Franc'),
    ('CHW', 2, 'WIR Franc'),
    ('CLF', 4, 'Unidad de Fomento'),
    ('CLP', 0, 'Chilean Peso'),
    ('CNY', 2, 'Yuan Renminbi'),
    ('COP', 2, 'Colombian Peso'),
    ('COU', 2, 'Unidad de Valor Real'),
    ('CRC', 2, 'Costa Rican Colon'),
    ('CUP', 2, 'Cuban Peso'),
    ('CVE', 2, 'Cabo Verde Escudo'),
    ('CZK', 2, 'Czech Koruna'),
    ('DJF', 0, 'Djibouti Franc'),
    ('DKK', 2, 'Danish Krone'),
    ('DOP', 2, 'Dominican Peso'),
    ('DZD', 2, 'Algerian Dinar'),
    ('EGP', 2, 'Egyptian Pound'),
    ('ERN', 2, 'Nakfa'),
    ('ETB', 2, 'Ethiopian Birr'),
    ('EUR', 2, 'Euro'),
    ('FJD', 2, 'Fiji Dollar'),
    ('FKP', 2, 'Falkland Islands Pound'),
    ('GBP', 2, 'Pound Sterling'),
    ('GEL', 2, 'Lari'),
    ('GHS', 2, 'Ghana Cedi'),
    ('GIP', 2, 'Gibraltar Pound'),
    ('GMD', 2, 'Dalasi'),
    ('GNF', 0, 'Guinean Franc'),
    ('GTQ', 2, 'Quetzal'),
    ('GYD', 2, 'Guyana Dollar'),
    ('HKD', 2, 'Hong Kong Dollar'),
    ('HNL', 2, 'Lempira'),
    ('HTG', 2, 'Gourde'),
    ('HUF', 2, 'Forint'),
    ('IDR', 2, 'Rupiah'),
    ('ILS', 2, 'New Israeli Sheqel'),
    ('INR', 2, 'Indian Rupee'),
    ('IQD', 3, 'Iraqi Dinar'),
    ('IRR', 2, 'Iranian Rial'),
    ('ISK', 0, 'Iceland Krona'),
    ('JMD', 2, 'Jamaican Dollar'),
    ('JOD', 3, 'Jordanian Dinar'),
    ('JPY', 0, 'Yen'),
    ('KES', 2, 'Kenyan Shilling'),
    ('KGS', 2, 'Som'),
    ('KHR', 2, 'Riel'),
    ('KMF', 0, 'Comorian Franc'),
    ('KPW', 2, 'North Korean Won'),
    ('KRW', 0, 'Won'),
    ('KWD', 3, 'Kuwaiti Dinar'),
    ('KYD', 2, 'Cayman Islands Dollar'),
    ('KZT', 2, 'Tenge'),
    ('LAK', 2, 'Lao Kip'),
    ('LBP', 2, 'Lebanese Pound'),
    ('LKR', 2, 'Sri Lanka Rupee'),
    ('LRD', 2, 'Liberian Dollar'),
    ('LSL', 2, 'Loti'),
    ('LYD', 3, 'Libyan Dinar'),
    ('MAD', 2, 'Moroccan Dirham'),
    ('MDL', 2, 'Moldovan Leu'),
    ('MGA', 2, 'Malagasy Ariary'),
    ('MKD', 2, 'Denar'),
    ('MMK', 2, 'Kyat'),
    ('MNT', 2, 'Tugrik'),
    ('MOP', 2, 'Pataca'),
    ('MRU', 2, 'Ouguiya'),
    ('MUR', 2, 'Mauritius Rupee'),
    ('MVR', 2, 'Rufiyaa'),
    ('MWK', 2, 'Malawi Kwacha'),
    ('MXN', 2, 'Mexican Peso'),
    ('MXV', 2, 'Mexican Unidad de Inversion (UDI)'),
    ('MYR', 2, 'Malaysian Ringgit'),
    ('MZN', 2, 'Mozambique Metical'),
    ('NAD', 2, 'Namibia Dollar'),
    ('NGN', 2, 'Naira'),
    ('NIO', 2, 'Cordoba Oro'),
    ('NOK', 2, 'Norwegian Krone'),
    ('NPR', 2, 'Nepalese Rupee'),
    ('NZD', 2, 'New Zealand Dollar'),
    ('OMR', 3, 'Rial Omani'),
    ('PAB', 2, 'Balboa'),
    ('PEN', 2, 'Sol'),
    ('PGK', 2, 'Kina'),
    ('PHP', 2, 'Philippine Peso'),
    ('PKR', 2, 'Pakistan Rupee'),
    ('PLN', 2, 'Zloty'),
    ('PYG', 0, 'Guarani'),
    ('QAR', 2, 'Qatari Rial'),
    ('RON', 2, 'Romanian Leu'),
    ('RSD', 2, 'Serbian Dinar'),
    ('RUB', 2, 'Russian Ruble'),
    ('RWF', 0, 'Rwanda Franc'),
    ('SAR', 2, 'Saudi Riyal'),
    ('SBD', 2, 'Solomon Islands Dollar'),
    ('SCR', 2, 'Seychelles Rupee'),
    ('SDG', 2, 'Sudanese Pound'),
    ('SEK', 2, 'Swedish Krona'),
    ('SGD', 2, 'Singapore Dollar'),
    ('SHP', 2, 'Saint Helena Pound'),
    ('SLE', 2, 'Leone'),
    ('SOS', 2, 'Somali Shilling'),
    ('SRD', 2, 'Surinam Dollar'),
    ('SSP', 2, 'South Sudanese Pound'),
    ('STN', 2, 'Dobra'),
    ('SVC', 2, 'El Salvador Colon'),
    ('SYP', 2, 'Syrian Pound'),
    ('SZL', 2, 'Lilangeni'),
    ('THB', 2, 'Baht'),
    ('TJS', 2, 'Somoni'),
    ('TMT', 2, 'Turkmenistan New Manat'),
    ('TND', 3, 'Tunisian Dinar'),
    ('TOP', 2, 'Pa''anga'),
    ('TRY', 2, 'Turkish Lira'),
    ('TTD', 2, 'Trinidad and Tobago Dollar'),
    ('TWD', 2, 'New Taiwan Dollar'),
    ('TZS', 2, 'Tanzanian Shilling'),
    ('UAH', 2, 'Hryvnia'),
    ('UGX', 0, 'Uganda Shilling'),
    ('USD', 2, 'US Dollar'),
    ('USN', 2, 'US Dollar (Next day)'),
    ('UYI', 0, 'Uruguay Peso en Unidades Indexadas (UI)'),
    ('UYU', 2, 'Peso Uruguayo'),
    ('UYW', 4, 'Unidad Previsional'),
    ('UZS', 2, 'Uzbekistan Sum'),
    ('VED', 2, 'Bolivar Soberano (digital)'),
    ('VES', 2, 'Bolivar Soberano'),
    ('VND', 0, 'Dong'),
    ('VUV', 0, 'Vatu'),
    ('WST', 2, 'Tala'),
    ('XAF', 0, 'CFA Franc BEAC'),
    ('XCD', 2, 'East Caribbean Dollar'),
    ('XCG', 2, 'Caribbean Guilder'),
    ('XOF', 0, 'CFA Franc BCEAO'),
    ('XPF', 0, 'CFP Franc'),
    ('YER', 2, 'Yemeni Rial'),
    ('ZAR', 2, 'Rand'),
    ('ZMW', 2, 'Zambian Kwacha'),
    ('ZWG', 2, 'Zimbabwe Gold');

INSERT INTO ordergate.settings (key, value) VALUES ('default_currency', 'USD')
ON CONFLICT (key) DO NOTHING;

-- The new columns. A constant default fills the existing rows without rewriting the tables;
-- it is dropped again where the trigger currency_default takes over (rows inserted without a
-- currency get default_currency as it is then).
ALTER TABLE ordergate.orders
    ADD COLUMN currency text COLLATE "C" NOT NULL DEFAULT 'USD',
    ADD COLUMN allow_partial boolean NOT NULL DEFAULT false,
    ADD COLUMN captured_cents bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT orders_currency_fkey FOREIGN KEY (currency) REFERENCES ordergate.currencies (code),
    ADD CONSTRAINT orders_captured_cents_check
        CHECK (captured_cents >= 0 AND (allow_partial OR captured_cents = 0));
ALTER TABLE ordergate.orders ALTER COLUMN currency DROP DEFAULT;
COMMENT ON COLUMN ordergate.orders.currency IS
    'The ISO 4217 code of amount_cents (currencies); set when placed, immutable';
COMMENT ON COLUMN ordergate.orders.allow_partial IS
    'The order may be paid in parts: parts below the amount are captured, the one that reaches it pays';
COMMENT ON COLUMN ordergate.orders.captured_cents IS
    'The parts captured so far (allow_partial orders; 0 otherwise); changes only while pending';

ALTER TABLE ordergate.payments
    ADD COLUMN currency text COLLATE "C" NOT NULL DEFAULT 'USD',
    ADD COLUMN operator text,
    ADD COLUMN reason text,
    ADD CONSTRAINT payments_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    ADD CONSTRAINT payments_operator_check CHECK ((operator IS NULL) = (reason IS NULL)),
    DROP CONSTRAINT payments_outcome_check,
    ADD CONSTRAINT payments_outcome_check
        CHECK (outcome IN ('processing', 'paid', 'partial', 'overpaid', 'late_payment', 'double_payment',
                           'amount_mismatch', 'currency_mismatch', 'not_found'));
ALTER TABLE ordergate.payments ALTER COLUMN currency DROP DEFAULT;
DROP INDEX ordergate.payments_one_paid_per_order_uq;
CREATE UNIQUE INDEX payments_one_paid_per_order_uq ON ordergate.payments (order_no)
    WHERE outcome IN ('paid', 'overpaid');
COMMENT ON INDEX ordergate.payments_one_paid_per_order_uq IS
    'No order is paid by two transactions (paid or overpaid)';
COMMENT ON COLUMN ordergate.payments.currency IS
    'The currency the payment was made in (the order''s when the callback named none)';
COMMENT ON COLUMN ordergate.payments.operator IS
    'A payment taken by staff: who took it (channel manual); NULL otherwise';
COMMENT ON COLUMN ordergate.payments.reason IS
    'A payment taken by staff: why, as the operator gave it; NULL otherwise';

ALTER TABLE ordergate.exceptions
    ADD COLUMN currency text COLLATE "C" DEFAULT 'USD',
    DROP CONSTRAINT exceptions_kind_check,
    ADD CONSTRAINT exceptions_kind_check
        CHECK (kind IN ('late_payment', 'double_payment', 'amount_mismatch', 'unknown_order',
                        'refused_payment', 'currency_mismatch', 'overpaid', 'cancelled_part'));
ALTER TABLE ordergate.exceptions ALTER COLUMN currency DROP DEFAULT;
-- An exception without an amount has no currency either.
UPDATE ordergate.exceptions x SET currency = NULL WHERE x.amount_cents IS NULL;
COMMENT ON COLUMN ordergate.exceptions.currency IS
    'The currency of amount_cents (NULL when the amount is unknown)';

ALTER TABLE ordergate.status_log
    DROP CONSTRAINT status_log_source_check,
    ADD CONSTRAINT status_log_source_check
        CHECK (source IN ('timeout_consumer', 'timeout_scanner', 'payment_callback', 'manual',
                          'manual_payment'));

-- The archive mirrors the new columns; archive() copies them.
ALTER TABLE ordergate.archived_orders
    ADD COLUMN currency text COLLATE "C" NOT NULL DEFAULT 'USD',
    ADD COLUMN allow_partial boolean NOT NULL DEFAULT false,
    ADD COLUMN captured_cents bigint NOT NULL DEFAULT 0;
ALTER TABLE ordergate.archived_orders ALTER COLUMN currency DROP DEFAULT;
ALTER TABLE ordergate.archived_payments
    ADD COLUMN currency text COLLATE "C" NOT NULL DEFAULT 'USD',
    ADD COLUMN operator text,
    ADD COLUMN reason text;
ALTER TABLE ordergate.archived_payments ALTER COLUMN currency DROP DEFAULT;
ALTER TABLE ordergate.archived_exceptions
    ADD COLUMN currency text COLLATE "C" DEFAULT 'USD';
ALTER TABLE ordergate.archived_exceptions ALTER COLUMN currency DROP DEFAULT;
UPDATE ordergate.archived_exceptions x SET currency = NULL WHERE x.amount_cents IS NULL;

-- A different default currency set by hand before this migration: the rows just filled with
-- USD take it instead (the settings row existed only if someone wrote it directly).
DO $cur$
DECLARE
    v text := (SELECT s.value FROM ordergate.settings s WHERE s.key = 'default_currency');
BEGIN
    IF v IS DISTINCT FROM 'USD' THEN
        IF NOT EXISTS (SELECT 1 FROM ordergate.currencies c WHERE c.code = v) THEN
            RAISE EXCEPTION 'setting default_currency = % is not a code in currencies', v;
        END IF;
        UPDATE ordergate.orders SET currency = v;
        UPDATE ordergate.payments SET currency = v;
        UPDATE ordergate.exceptions SET currency = v WHERE amount_cents IS NOT NULL;
        UPDATE ordergate.archived_orders SET currency = v;
        UPDATE ordergate.archived_payments SET currency = v;
        UPDATE ordergate.archived_exceptions SET currency = v WHERE amount_cents IS NOT NULL;
    END IF;
END
$cur$;
