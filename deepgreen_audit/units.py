"""Unit conversions, each stated once."""

#: joules in one kilowatt-hour (CodeCarbon reports kWh; the tables' energy columns are joules)
J_PER_KWH = 3.6e6
