from gnnforge.packing._histogram import size_histogram
from gnnforge.packing._pack import pack
